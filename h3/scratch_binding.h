/* SCRATCH: the coordinator's binding interface (moq.h), until it is merged. */
#ifndef H3_SCRATCH_BINDING_H
#define H3_SCRATCH_BINDING_H
#include <sys/uio.h>
#include "moq.h"
struct moq_binding_ops {
	int (*stream_open)(void *b, int bidi, int64_t *sid);
	long (*stream_write)(void *b, int64_t sid, const struct iovec *iov, size_t n, int fin);
	int (*stream_reset)(void *b, int64_t sid, uint64_t code);
	int (*stream_stop_sending)(void *b, int64_t sid, uint64_t code);
	void (*close)(void *b, uint64_t code);
	void (*get_info)(void *b, struct moq_quic_conn_info *out);
};
struct moq_session *moq_binding_accept(struct moq_node *n, const struct moq_binding_ops *ops, void *b,
                                       enum moq_version v, const char *url, size_t url_len);
struct moq_session *moq_binding_connect(struct moq_node *n, const struct moq_binding_ops *ops, void *b,
                                        enum moq_version v, const char *path, int role);
void moq_binding_stream_data(struct moq_session *s, int64_t sid, const uint8_t *d, size_t len, int fin);
void moq_binding_stream_acked(struct moq_session *s, int64_t sid, uint64_t acked);
void moq_binding_stream_reset(struct moq_session *s, int64_t sid, uint64_t code);
void moq_binding_stream_stop_sending(struct moq_session *s, int64_t sid, uint64_t code);
void moq_binding_stream_closed(struct moq_session *s, int64_t sid);
void moq_binding_writable(struct moq_session *s);
void moq_binding_closed(struct moq_session *s, uint64_t code, int local);
#endif
