/*
 * errors_util.h — what the error-path suites (test_e2e_errors.c, test_e2e_errors_wire.c)
 * expect of an iWARP error: the Terminate triples softverbs sends, and the QP error
 * event that reports one.
 */
#ifndef SV_TEST_ERRORS_UTIL_H
#define SV_TEST_ERRORS_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "e2e_util.h"
#include "wire/rdmap.h"

#define EV(t) (1u << (t))
#define QP_ERR_EVENTS (EV(SV_EVENT_QP_FATAL) | EV(SV_EVENT_QP_REQ_ERR) | EV(SV_EVENT_QP_ACCESS_ERR))

/* Terminate triples (layer, etype, ecode) of RFC 5040 section 7 and RFC 5041 section 7.
 * Every refusal that depends on the STag (unknown, out of bounds, rights it lacks) has the
 * one "Invalid STag" code of its layer (wire/iwarp_term.c, doc/security.md), so these
 * tests expect no other. */
struct triple {
	uint8_t layer, etype, ecode;
};

extern const struct triple T_RDMAP_INV_STAG;
extern const struct triple T_DDP_T_INV_STAG;
extern const struct triple T_DDP_T_VERSION;
extern const struct triple T_DDP_NO_BUF;
extern const struct triple T_DDP_TOO_LONG;
extern const struct triple T_DDP_U_VERSION;
extern const struct triple T_RDMAP_OPCODE;
extern const struct triple T_RDMAP_VERSION;
extern const struct triple T_LLP_CRC;

/*
 * Waits for the QP error event of side s (other events are skipped), checks that it
 * names s's QP, that its type is in type_mask, and its Terminate triple and origin when
 * t is given. Acks it.
 */
void expect_qp_error_event(struct e2e_side *s, unsigned type_mask,
			   const struct triple *t, bool remote, const char *what);

#endif
