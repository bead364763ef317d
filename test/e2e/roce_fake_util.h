/*
 * roce_fake_util.h — a UDP-transport peer made of a plain UDP socket, for the tests of
 * the CM's wire behaviour (test_roce_cm_wire.c, test_roce_cm_dreq.c): RoCEv2 datagrams
 * built and read by hand, the MADs with the shared codec (wire/ib_cm.h), the ICRC
 * computed here so a bad one cannot hide. It sits at 127.0.0.201, outside the address
 * range the transport falls back to, so no device of the test takes its port.
 */
#ifndef TEST_ROCE_FAKE_UTIL_H
#define TEST_ROCE_FAKE_UTIL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "softverbs.h"
#include "wire/ib_cm.h"

#define RF_IP 0x7f0000c9		/* 127.0.0.201 */
#define RF_WAIT_MS 5000

/* A device with an RC QP of 4 WRs and an id on its own channel: the one that talks to the
 * fake peer, or the one a test's child process connects with. */
struct rf_dev {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;
	uint8_t gid[16];
};

/* Opens d on UDP port port with loss recovery retx (enum sv_retx_mode, -1: the default).
 * 0, or the step that failed: it asserts nothing, so a process without Criterion (a
 * test's child) can use it. */
int rf_dev_open(struct rf_dev *d, uint16_t port, int retx);

/* A UDP port free at RF_IP (a device of the test opens the same number at its address). */
uint16_t rf_free_port(void);
/* A socket bound to RF_IP:port (0: any), its address in *a. */
int rf_socket(uint16_t port, struct sockaddr_in *a);
/* Sends pkt (its last 4 bytes the ICRC, computed here) from fake to to. */
void rf_send(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to, uint8_t *pkt,
	     size_t len);
/* Sends m as a UD SEND_ONLY from QP1 to QP1 (the GSI Q_Key). */
void rf_mad(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to,
	    const struct sv_cm_msg *m);
/* The next datagram on fd within RF_WAIT_MS; none may have come to ent (-1: no check). */
ssize_t rf_recv(int fd, int ent, uint8_t *pkt, size_t cap);
/* The next MAD on fd of attribute attr, others (repeats of earlier ones) skipped. */
void rf_expect_mad(int fd, int ent, uint16_t attr, struct sv_cm_msg *m);

#endif
