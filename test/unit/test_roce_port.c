/*
 * test_roce_port.c — the port's active MTU from a link MTU (wire/roce_port.c): the
 * largest IB MTU whose packets, headers included, fit the link, as the kernel's rxe
 * derives it (80 bytes of headers; 84 over IPv6, whose WRITE Only with Immediate of one
 * full path MTU needs them).
 */
#include <criterion/criterion.h>
#include <sys/socket.h>

#include "wire/roce.h"

Test(roce_port, common_links)
{
	cr_expect_eq(sv__roce_ib_mtu(1500, AF_INET), SV_MTU_1024);
	cr_expect_eq(sv__roce_ib_mtu(1500, AF_INET6), SV_MTU_1024);
	cr_expect_eq(sv__roce_ib_mtu(9000, AF_INET), SV_MTU_4096);
	cr_expect_eq(sv__roce_ib_mtu(9000, AF_INET6), SV_MTU_4096);
	cr_expect_eq(sv__roce_ib_mtu(65536, AF_INET), SV_MTU_4096);
	cr_expect_eq(sv__roce_ib_mtu(1280, AF_INET6), SV_MTU_1024);	/* IPv6 minimum */
	cr_expect_eq(sv__roce_ib_mtu(576, AF_INET), SV_MTU_256);
}

Test(roce_port, boundaries)
{
	/* IPv4: 80 bytes set aside, as rxe does. */
	cr_expect_eq(sv__roce_ib_mtu(4176, AF_INET), SV_MTU_4096);
	cr_expect_eq(sv__roce_ib_mtu(4175, AF_INET), SV_MTU_2048);
	cr_expect_eq(sv__roce_ib_mtu(2128, AF_INET), SV_MTU_2048);
	cr_expect_eq(sv__roce_ib_mtu(2127, AF_INET), SV_MTU_1024);
	/* IPv6: 40 + 8 UDP + 12 BTH + 16 RETH + 4 ImmDt + 4 ICRC = 84. */
	cr_expect_eq(sv__roce_ib_mtu(4180, AF_INET6), SV_MTU_4096);
	cr_expect_eq(sv__roce_ib_mtu(4179, AF_INET6), SV_MTU_2048);
	/* Below 256 + headers rxe falls back to 256, the smallest IB MTU. */
	cr_expect_eq(sv__roce_ib_mtu(336, AF_INET), SV_MTU_256);
	cr_expect_eq(sv__roce_ib_mtu(100, AF_INET), SV_MTU_256);
	cr_expect_eq(sv__roce_ib_mtu(0, AF_INET6), SV_MTU_256);
}
