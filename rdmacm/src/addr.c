/*
 * Addresses on RoCE, from the host's own tables: the route's source IP
 * from the kernel's routing (a connected UDP socket's name), the RDMA port
 * and GID index of an IP from the GID tables in sysfs, and the device
 * contexts the ids hand to the program.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ibcm.h"

/* Where sysfs is: a test build points it at a tree of its own. */
#ifndef IBCM_SYSFS
#define IBCM_SYSFS "/sys"
#endif

static struct ibv_context **devs;
static int ndevs = -1;

/* dev_list opens every RDMA device once, as librdmacm does: the contexts
 * are the ones ids carry in verbs, shared by every id of the process. */
struct ibv_context **dev_list(int *n)
{
	if (ndevs < 0) {
		int k = 0;
		struct ibv_device **l = ibv_get_device_list(&k);
		ndevs = 0;
		devs = calloc(k + 1, sizeof *devs);
		for (int i = 0; l && devs && i < k; i++) {
			struct ibv_context *c = ibv_open_device(l[i]);
			if (c)
				devs[ndevs++] = c;
		}
		if (l)
			ibv_free_device_list(l);
	}
	*n = ndevs;
	return devs;
}

struct ibv_context *dev_by_name(const char *name)
{
	int n;
	struct ibv_context **l = dev_list(&n);
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]->device), name))
			return l[i];
	return NULL;
}

void addr_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

uint16_t addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

socklen_t addr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET: return sizeof(struct sockaddr_in);
	case AF_INET6: return sizeof(struct sockaddr_in6);
	case AF_IB: return sizeof(struct sockaddr_storage);
	default: return 0;
	}
}

int addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

int addr_route_src(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t n = addr_len(dst);
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_storage d;
	memcpy(&d, dst, n);
	if (addr_port((struct sockaddr *)&d) == 0)
		((struct sockaddr_in *)&d)->sin_port = htons(9); /* any port routes */
	socklen_t sn = sizeof *src;
	int ret = connect(fd, (struct sockaddr *)&d, n) ||
		  getsockname(fd, (struct sockaddr *)src, &sn);
	int e = errno;
	close(fd);
	errno = e;
	return ret ? -1 : 0;
}

static int read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *s = fgets(buf, n, f);
	fclose(f);
	if (!s)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* gid_match scans one port's GID table for gid; a RoCE v2 entry wins over
 * any other type, as rdma_cm prefers it for IP addresses. Returns the
 * index, or -1. */
static int gid_match(const char *dev, int port, const uint8_t gid[16])
{
	char path[512], line[128];
	int best = -1;
	for (int i = 0; i < 256; i++) {
		uint8_t g[16];
		snprintf(path, sizeof path, IBCM_SYSFS "/class/infiniband/%s/ports/%d/gids/%d", dev, port, i);
		if (read_line(path, line, sizeof line))
			break;
		if (inet_pton(AF_INET6, line, g) != 1 || memcmp(g, gid, 16))
			continue;
		snprintf(path, sizeof path, IBCM_SYSFS "/class/infiniband/%s/ports/%d/gid_attrs/types/%d",
			 dev, port, i);
		if (read_line(path, line, sizeof line) == 0 && strstr(line, "v2"))
			return i;
		if (best < 0)
			best = i;
	}
	return best;
}

int addr_local(const struct sockaddr *sa, struct ibv_context **ctx, uint8_t *port,
	       uint8_t *gid_index)
{
	uint8_t gid[16];
	addr_gid(sa, gid);
	DIR *d = opendir(IBCM_SYSFS "/class/infiniband");
	if (!d) {
		errno = ENODEV;
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		for (int p = 1; p < 256; p++) {
			char path[512];
			snprintf(path, sizeof path, IBCM_SYSFS "/class/infiniband/%s/ports/%d", e->d_name, p);
			if (access(path, F_OK))
				break;
			int i = gid_match(e->d_name, p, gid);
			if (i < 0)
				continue;
			*ctx = dev_by_name(e->d_name);
			if (!*ctx)
				continue;
			*port = p;
			*gid_index = i;
			closedir(d);
			return 0;
		}
	}
	closedir(d);
	errno = EADDRNOTAVAIL;
	return -1;
}
