/* SPDX-License-Identifier: MIT */
/*
 * pmd_config.h: the relay's configuration. Every key can be given three ways,
 * applied in this order (later wins):
 *
 *   1. a config file (`--config PATH` or MOQDP_CONFIG), lines `key = value`,
 *      `#` starts a comment;
 *   2. environment variables MOQDP_<KEY> (upper case, '-' written as '_');
 *   3. relay arguments after EAL's `--`: `--key value` or `--key=value`.
 *
 * Unknown keys are rejected in all three. A few MOQDP_* names are not relay
 * options and are skipped: MOQDP_EAL (the EAL arguments of the systemd unit,
 * dpdk_app/moqdp-relay.service), the variables of scripts/ (MOQDP_BUILD_DIR,
 * MOQDP_FUZZ_BUILD_DIR, MOQDP_FUZZ_RUNS, MOQDP_DEPS_ROOT, MOQDP_DEPS_PREFIX,
 * MOQDP_PATCH_DIR, MOQDP_HUGEPAGES) and MOQDP_TEST_* (the test harness).
 * Values take units: durations
 * `30s`, `500ms`, `250us`, `2m`; sizes `8GiB`, `64MiB`, `4KiB`, `1500` (bytes).
 * A bad value fails the whole parse with one line naming the option.
 *
 * This header is EAL-free: parsing needs no DPDK, so every bad option is unit
 * tested without EAL. The port set-up that reads what a PMD reports is in
 * pmd_port.h.
 */
#ifndef MOQ_PMD_CONFIG_PMD_CONFIG_H
#define MOQ_PMD_CONFIG_PMD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Bounds of the fixed tables below. */
#define MOQ_CFG_MAX_LISTEN 4   /* listen addresses (e.g. one IPv4 + one IPv6 per port) */
#define MOQ_CFG_MAX_QUEUES 128 /* (port,queue,lcore) triples, as l3fwd's MAX_LCORE_PARAMS */
#define MOQ_CFG_PATH_MAX   256
#define MOQ_CFG_ERR_MAX    256 /* a good size for the caller's error buffer */

/* RX queues one lcore polls (l3fwd's MAX_RX_QUEUE_PER_LCORE); more are refused */
#define MOQ_CFG_MAX_LCORE_QUEUES 16

/* Where datagrams are sent and received. */
enum moq_cfg_backend {
	MOQ_CFG_BACKEND_DPDK = 0, /* DPDK ports, the network stack in net/net.h */
	MOQ_CFG_BACKEND_KERNEL,   /* kernel UDP sockets (per worker and --listen address) */
};

/* An IPv4 or IPv6 address with a prefix length (the on-link subnet). */
struct moq_cfg_addr {
	int family;        /* AF_INET or AF_INET6; 0 = unset */
	uint8_t addr[16];  /* network byte order; IPv4 in the first 4 bytes */
	uint8_t prefixlen; /* 32/128 when not given */
};

/* One l3fwd-style (port,queue,lcore) triple: RX queue @queue of @port is
 * polled by @lcore. */
struct moq_cfg_queue {
	uint16_t port;
	uint16_t queue;
	uint16_t lcore;
};

struct moq_pmd_config {
	/* network */
	struct moq_cfg_addr listen[MOQ_CFG_MAX_LISTEN];
	unsigned int nb_listen;
	uint16_t udp_port;
	struct moq_cfg_addr gateway4; /* next hop for off-link IPv4 peers (optional) */
	struct moq_cfg_addr gateway6;
	uint16_t mtu;

	/* TLS: empty paths mean a self-signed development certificate */
	char cert[MOQ_CFG_PATH_MAX];
	char key[MOQ_CFG_PATH_MAX];
	/* without --cert: the generated certificate and key are kept here
	 * until due for renewal ("" = nothing kept, a new one every start);
	 * default $STATE_DIRECTORY (systemd), /var/lib/moqdp as root, else
	 * $XDG_STATE_HOME/moqdp or ~/.local/state/moqdp */
	char state_dir[MOQ_CFG_PATH_MAX];

	/* cache */
	uint64_t cache_budget;   /* bytes */
	uint64_t max_latency_us; /* groups older than this expire */

	/* limits */
	uint32_t max_connections;
	uint32_t max_conns_per_addr; /* per worker and remote IP address; 0 = unlimited */
	uint32_t max_subscribers;
	uint32_t max_streams; /* per connection */
	uint32_t max_tracks;
	uint64_t idle_timeout_us;

	/* DPDK ports and lcores */
	enum moq_cfg_backend backend;
	struct moq_cfg_queue queues[MOQ_CFG_MAX_QUEUES];
	unsigned int nb_queues; /* 0: one queue per port on the first worker lcore */
	uint64_t portmask;      /* ports to use; 0 = all */
	uint16_t rx_desc;       /* requested; clamped to the device's limits */
	uint16_t tx_desc;
	uint32_t redirect_ring; /* per-lcore ring for packets of another lcore's CIDs */
	uint32_t pool_mbufs;    /* mbufs per socket pool; 0 = sized from queues x descriptors */
	char profile[32];       /* "auto" or a profile name (pmd_port.h) */

	/* operations */
	uint64_t stats_interval_us;    /* 0 = no stats line */
	char mgmt[64];                 /* "host:port" of the HTTP listener; "" = off */
	uint64_t drain_timeout_us;     /* SIGQUIT grace period */
	char config[MOQ_CFG_PATH_MAX]; /* the config file that was read, if any */

	/* per-peer bounds (moq.h, struct moq_node_cfg) */
	uint32_t max_broadcasts;            /* origin table */
	uint32_t max_session_broadcasts;    /* announced by one session */
	uint32_t max_announce_requests;     /* per session */
	uint32_t max_session_subscriptions; /* per session */
	uint32_t max_session_fetches;       /* in flight per session */
	uint32_t link_max_subscriptions;    /* per cluster link (moq.h, cfg.link_max_*) */
	uint32_t link_max_broadcasts;       /* announced over one cluster link */
	uint32_t max_broadcast_name;        /* bytes */
	uint32_t max_track_name;            /* bytes */
	uint32_t max_message;               /* control message bytes */
	/* auth (auth.h; docs/DEPLOY.md, Auth): empty = off */
	char auth_key[MOQ_CFG_PATH_MAX];     /* a JWK file */
	char auth_key_dir[MOQ_CFG_PATH_MAX]; /* a directory of {kid}.jwk */
	char auth_public[MOQ_CFG_PATH_MAX];  /* comma-separated prefixes; "" = all */
	int auth_public_set;                 /* auth_public was given (it may be "") */
	/* moq-relay's current contract (auth/authurl.h, pattern.h) */
	char auth_url[MOQ_CFG_PATH_MAX];              /* an auth server; empty = none */
	char auth_tls_root[MOQ_CFG_PATH_MAX];         /* its CA bundle (https://) */
	char auth_public_publish[MOQ_CFG_PATH_MAX];   /* patterns, publish only */
	char auth_public_subscribe[MOQ_CFG_PATH_MAX]; /* patterns, subscribe only */
	/* relay-to-relay (AUTH-CLUSTER.md, Relay-to-relay; dpdk_app/cluster.h) */
	char cluster_connect[1024];           /* comma-separated peer URLs; "" = none */
	char cluster_token[MOQ_CFG_PATH_MAX]; /* file with the JWT sent to peers */
	char cluster_ca[MOQ_CFG_PATH_MAX];    /* CA file peers are verified with,
					       * "insecure" = no verification */
	char cluster_name[MOQ_CFG_PATH_MAX];  /* the name peers' certificates must carry
					       * (with a CA file); "" = each URL's host */
	uint64_t upstream_hold_us;            /* upstream kept after its last subscriber */
	int upstream_hold_set;                /* given (else 2 s with cluster_connect, 0 without) */
	uint32_t route_cost;                  /* lite-06 SETUP Cost declared (1: not sent) */
	/* admission (issue 13; moq.h, moq_node_admit): a worker busier than
	 * admit_busy percent of its last window admits no new subscriber (0 =
	 * off); refused with SUBSCRIBE reset 11, and GOAWAY naming
	 * admit_goaway when set ("" = bounds only) */
	uint32_t admit_busy;
	char admit_goaway[MOQ_CFG_PATH_MAX];
	/* the TCP side (web/web.h): HTTP + WebSocket on TCP --port */
	uint32_t tcp;                    /* 1: on (kernel backend) */
	uint32_t max_tcp_conns;          /* per worker */
	char web_root[MOQ_CFG_PATH_MAX]; /* served under /demo/; "" = none */
	/* WebTransport (h3.h, struct moq_wt_cfg) and the WebSocket upgrade
	 * (web.h, struct moq_web_cfg): comma-separated origins a browser's
	 * CONNECT or upgrade may come from; "" = any (moq-relay's behaviour) */
	char allowed_origins[MOQ_CFG_PATH_MAX];
	/* issue 23: subscriber connections leave ngtcp2 for the 1-RTT fast
	 * path once set up and quiet (quic.h, config.fastpath); 1 = on */
	uint32_t fastpath;
	uint32_t fastpath_conns; /* the engine's connection pool per worker */
	/* 1: fastpath/gcm.c's AES-GCM where the CPU allows (fp_aead_select) */
	uint32_t fastpath_gcm;
};

/*
 * moq_pmd_config_defaults: fill @cfg with the defaults (listen 0.0.0.0:4443,
 * 1 GiB cache, 5 s max latency, dpdk backend, stats every 5 s, ...).
 */
void moq_pmd_config_defaults(struct moq_pmd_config *cfg);

/*
 * moq_pmd_config_parse: build @cfg from defaults, the config file, the
 * environment @envp (NULL-terminated "K=V" strings; NULL means `environ`) and
 * the relay arguments @argv[0..argc) (the part after EAL's "--"; argv[0] is
 * not skipped, pass argv+1 yourself). `--help` is not handled here.
 *
 * Returns 0, or MOQ_ERR_CONFIG with one line in @err (@errlen bytes, NUL
 * terminated) naming the option, e.g.
 *   "--cache-budget: '8XB' is not a size (e.g. 512MiB, 8GiB)".
 * On error @cfg holds partial values and must not be used.
 */
int moq_pmd_config_parse(struct moq_pmd_config *cfg, int argc, char *const *argv, char *const *envp,
                         char *err, size_t errlen);

/*
 * moq_pmd_config_set: set one key (dashes or underscores) to @value, as the
 * three sources do. @source ("--", "MOQDP_", or "file:line") only shapes the
 * error text. Returns 0, or MOQ_ERR_CONFIG with @err set (unknown key or bad
 * value; @cfg is unchanged then).
 */
int moq_pmd_config_set(struct moq_pmd_config *cfg, const char *key, const char *value,
                       const char *source, char *err, size_t errlen);

/*
 * moq_pmd_config_check: the checks across keys (cert without key, a
 * (port,queue) given twice, more than MOQ_CFG_MAX_LCORE_QUEUES queues on one
 * lcore, ...), run by moq_pmd_config_parse after all
 * sources. Returns 0 or MOQ_ERR_CONFIG with @err set.
 */
int moq_pmd_config_check(const struct moq_pmd_config *cfg, char *err, size_t errlen);

/*
 * moq_pmd_parse_duration: "30s", "500ms", "250us", "2m", "1h", "100ns"
 * (a unit is required; "0" is allowed) into microseconds in @us.
 * Returns 0 or MOQ_ERR_INVAL.
 */
int moq_pmd_parse_duration(const char *s, uint64_t *us);

/*
 * moq_pmd_parse_size: "8GiB", "64MiB", "4KiB", "1500", "2GB", "10k" (k/M/G
 * and KB/MB/GB are decimal, KiB/MiB/GiB binary) into bytes in @bytes.
 * Returns 0, MOQ_ERR_INVAL (not a size) or MOQ_ERR_TOO_LARGE (overflow).
 */
int moq_pmd_parse_size(const char *s, uint64_t *bytes);

/*
 * moq_pmd_parse_queues: "(0,0,1),(0,1,2)" into @out (at most @cap triples);
 * @n receives the count. Returns 0, MOQ_ERR_INVAL (syntax) or
 * MOQ_ERR_LIMIT (more than @cap).
 */
int moq_pmd_parse_queues(const char *s, struct moq_cfg_queue *out, unsigned int cap,
                         unsigned int *n);

/*
 * moq_pmd_parse_addr: "10.0.0.2", "10.0.0.2/24", "2001:db8::1/64" into @out.
 * Returns 0 or MOQ_ERR_INVAL.
 */
int moq_pmd_parse_addr(const char *s, struct moq_cfg_addr *out);

/*
 * moq_pmd_config_usage: the option list, one key per line with its default
 * and meaning, for --help. A static string.
 */
const char *moq_pmd_config_usage(void);

#endif /* MOQ_PMD_CONFIG_PMD_CONFIG_H */
