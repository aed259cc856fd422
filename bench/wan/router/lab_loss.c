// The WAN lab's random loss (netns.sh), an XDP program on the router's end of a region's
// link: it drops each IPv4 packet from region i to region j with that pair's probability
// before the router's GRO merges packets, so a loss takes one segment (the region sends
// MSS-sized packets where a pair is lossy), as on a real path, while the delay line still
// sees merged packets. Dropped here, in the router's receive path, the sender's TCP learns
// of the loss only as a real path would tell it: by missing acknowledgements.
//
// netns.sh writes the pairs' thresholds into lab_loss_table.h (LAB_LOSS_PAIRS: a list of
// LAB_PAIR(src, dst, threshold) with addresses in network order and threshold =
// probability * 2^32) and compiles this file with clang -target bpf.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>

#include "lab_loss_table.h"

static unsigned int (*bpf_get_prandom_u32)(void) = (void *)BPF_FUNC_get_prandom_u32;

static __u32 threshold(__u32 src, __u32 dst) {
#define LAB_PAIR(s, d, t) \
  if (src == (s) && dst == (d)) return (t);
  LAB_LOSS_PAIRS
#undef LAB_PAIR
  return 0;
}

__attribute__((section("xdp"), used)) int lab_loss(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP)) return XDP_PASS;
  struct iphdr *ip = (void *)(eth + 1);
  if ((void *)(ip + 1) > end) return XDP_PASS;
  const __u32 t = threshold(ip->saddr, ip->daddr);
  return t && bpf_get_prandom_u32() < t ? XDP_DROP : XDP_PASS;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
