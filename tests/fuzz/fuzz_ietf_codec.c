/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ietf_codec.c: libFuzzer target for moq/ietf_codec.c (IETF
 * moq-transport drafts 14-20). The first byte picks the draft; the rest is
 * decoded as a control message (re-encoded, decoded again: the bytes must
 * come back), as a subgroup stream (header then objects), as a datagram, as
 * a fetch stream's objects, and as a filter value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ietf_codec.h"
#include "moq_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static int known(int rc)
{
	return rc == MOQ_ERR_SHORT || rc == MOQ_ERR_DECODE || rc == MOQ_ERR_PROTO;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[1 << 17], again[1 << 17];
	static struct moq_ietf_msg m, m2;
	enum moq_ietf_draft d;
	const uint8_t *p;
	size_t n, o;
	int rc;

	if (size < 1)
		return 0;
	d = (enum moq_ietf_draft)(MOQ_IETF_14 + data[0] % 7);
	p = data + 1;
	n = size - 1;

	/* a control message */
	rc = moq_ietf_msg_decode(p, n, d, &m);
	if (rc < 0) {
		check(known(rc));
	} else {
		int e, e2;
		check((size_t)rc <= n);
		e = moq_ietf_msg_encode(out, sizeof(out), d, &m);
		/* a decoded message re-encodes (no longer: minimal varints) unless
		 * a decoded field is out of what the encoder takes */
		if (e > 0) {
			check(e <= rc + 16);
			e2 = moq_ietf_msg_decode(out, (size_t)e, d, &m2);
			check(e2 == e);
			check(m2.kind == m.kind);
			e2 = moq_ietf_msg_encode(again, sizeof(again), d, &m2);
			check(e2 == e && memcmp(out, again, (size_t)e) == 0);
		} else {
			check(e == MOQ_ERR_INVAL || e == MOQ_ERR_TOO_LARGE);
		}
	}

	/* a subgroup stream */
	{
		struct moq_ietf_subgroup_hdr h;
		rc = moq_ietf_subgroup_hdr_decode(p, n, d, &h);
		if (rc > 0) {
			o = (size_t)rc;
			while (o < n) {
				struct moq_ietf_object ob;
				int k = moq_ietf_object_decode_head(p + o, n - o, d, h.extensions,
				                                    &ob);
				if (k <= 0) {
					check(k == MOQ_ERR_SHORT || k == MOQ_ERR_DECODE);
					break;
				}
				o += (size_t)k;
				if (ob.payload_len > n - o)
					break;
				o += ob.payload_len;
			}
		} else {
			check(rc == MOQ_ERR_SHORT || rc == MOQ_ERR_DECODE);
		}
	}

	/* a datagram */
	{
		struct moq_ietf_datagram g;
		rc = moq_ietf_datagram_decode(p, n, d, &g);
		if (rc == 0) {
			struct moq_ietf_datagram g2;
			int e = moq_ietf_datagram_encode(out, sizeof(out), d, &g);
			/* not necessarily shorter: 18+'s 7-byte varint re-encodes in 8 */
			check(e > 0);
			check(moq_ietf_datagram_decode(out, (size_t)e, d, &g2) == 0);
			check(g2.group == g.group && g2.track_alias == g.track_alias &&
			      g2.payload_len == g.payload_len && g2.status == g.status);
		} else {
			check(rc == MOQ_ERR_DECODE);
		}
	}

	/* fetch objects */
	{
		struct moq_ietf_fetch_obj prev, cur;
		int first = 1;
		o = 0;
		while (o < n) {
			int k = moq_ietf_fetch_obj_decode_head(p + o, n - o, d,
			                                       first ? NULL : &prev, &cur);
			if (k <= 0) {
				check(k == MOQ_ERR_SHORT || k == MOQ_ERR_DECODE);
				break;
			}
			o += (size_t)k;
			if (cur.payload_len > n - o)
				break;
			o += cur.payload_len;
			prev = cur;
			first = 0;
		}
	}

	/* a filter value */
	{
		struct moq_ietf_filter f;
		if (moq_ietf_filter_decode(p, n < 64 ? n : 64, d, &f) == 0) {
			int e = moq_ietf_filter_encode(out, sizeof(out), d, &f);
			check(e >= 0 || e == MOQ_ERR_INVAL);
		}
	}
	return 0;
}
