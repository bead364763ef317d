/*
 * route_probe.c — a librdmacm program for test_apps_rdmacm.c: resolves the address and
 * the route to argv[1] with the synchronous calls and prints what route.path_rec holds,
 * reading it as applications do (path_rec->mtu), then the port's active MTU to compare.
 * Exit 0 when both resolutions succeeded.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

static void print_gid(const char *name, const union ibv_gid *g)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, g->raw, s, sizeof(s));
	printf("%s %s\n", name, s);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai;
	struct rdma_cm_id *id;
	struct ibv_port_attr pa;
	struct ibv_sa_path_rec *p;

	if (argc != 2 || getaddrinfo(argv[1], NULL, &hints, &ai) != 0) {
		fprintf(stderr, "usage: route_probe <numeric address>\n");
		return 2;
	}
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 1;
	}
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000)) {
		perror("rdma_resolve_addr");
		return 1;
	}
	if (rdma_resolve_route(id, 2000)) {
		perror("rdma_resolve_route");
		return 1;
	}
	freeaddrinfo(ai);
	printf("num_paths %d\n", id->route.num_paths);
	printf("path_rec %s\n", id->route.path_rec ? "set" : "NULL");
	if (id->route.num_paths > 0 && id->route.path_rec) {
		p = id->route.path_rec;
		print_gid("sgid", &p->sgid);
		print_gid("dgid", &p->dgid);
		printf("mtu %u\n", p->mtu);
		printf("pkey 0x%04x\n", ntohs(p->pkey));
		printf("hop_limit %u\n", p->hop_limit);
		printf("traffic_class %u\n", p->traffic_class);
		printf("sl %u\n", p->sl);
		printf("packet_life_time %u\n", p->packet_life_time);
		printf("reversible %d\n", p->reversible);
	}
	if (ibv_query_port(id->verbs, id->port_num, &pa) == 0)
		printf("active_mtu %u\n", (unsigned)pa.active_mtu);
	rdma_destroy_id(id);
	return 0;
}
