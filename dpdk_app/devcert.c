/* SPDX-License-Identifier: MIT */
/*
 * devcert.c: the generated development certificate kept in --state-dir
 * (issue 22, item 15). A browser pins it by hash (WebTransport's
 * serverCertificateHashes, @moq/net's certificate.sha256), so a new one at
 * every start broke every pinned page on a restart. Without --cert the relay
 * keeps the certificate and its key in <state-dir>/dev-cert.pem and
 * dev-key.pem (0600) and serves them again at the next start while they
 * have more than the renewal margin left (CERT_RENEW_BEFORE_S: the 14-day
 * validity browsers accept for pinning ends at most a day later); then, or
 * when they are missing or unusable, it generates a new pair and writes it
 * (quic.h, moq_quic_tls_dev_cert_write). Relays sharing a state directory
 * take a lock on <state-dir>/dev-cert.lock (flock) around the check and
 * the write, so they agree on one certificate and never read a half
 * written pair. Main lcore, at start and at renewal: a few ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "moq_err.h"
#include "quic.h"
#include "relay_int.h"

static int dfail(char *err, size_t errlen, const char *what, const char *dir, int e)
{
	snprintf(err, errlen, "--state-dir: %s %s: %s", what, dir, strerror(e));
	return MOQ_ERR_CONFIG;
}

/* mkdir -p @dir (0700 for what it makes). */
static int mkdir_p(const char *dir)
{
	char p[MOQ_CFG_PATH_MAX];

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int moq_relay_state_dir_check(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (dir[0] == '\0')
		return 0;
	if (dir[0] != '/') {
		snprintf(err, errlen, "--state-dir: '%s' is not an absolute path", dir);
		return MOQ_ERR_CONFIG;
	}
	if (mkdir_p(dir) != 0)
		return dfail(err, errlen, "cannot create", dir, errno);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return dfail(err, errlen, "is not a directory:", dir, errno ? errno : ENOTDIR);
	if (access(dir, W_OK | X_OK) != 0)
		return dfail(err, errlen, "is not writable:", dir, errno);
	return 0;
}

/* Load the pair in @cert / @key; NULL when missing, unusable, not yet
 * valid, due for renewal (@renew_before s left or less), or the one whose
 * fingerprint is @avoid. */
static struct moq_quic_tls *load_kept(const char *cert, const char *key, const uint8_t *avoid,
                                      int64_t renew_before)
{
	struct moq_quic_tls *t;
	int64_t nb, na, now = (int64_t)time(NULL);
	uint8_t fp[32];
	int qerr;

	if (access(cert, R_OK) != 0 || access(key, R_OK) != 0)
		return NULL;
	t = moq_quic_tls_new(cert, key, &qerr);
	if (t == NULL)
		return NULL;
	moq_quic_tls_fingerprint(t, fp);
	if (moq_quic_tls_validity(t, &nb, &na) != 0 || nb > now + 60 || na - now <= renew_before ||
	    (avoid != NULL && memcmp(fp, avoid, 32) == 0)) {
		moq_quic_tls_free(t);
		return NULL;
	}
	return t;
}

struct moq_quic_tls *moq_relay_dev_cert(const char *dir, const uint8_t *avoid, int64_t renew_before,
                                        int *made, char *err, size_t errlen)
{
	char cert[MOQ_CFG_PATH_MAX + 16], key[MOQ_CFG_PATH_MAX + 16], lock[MOQ_CFG_PATH_MAX + 16];
	char tcert[MOQ_CFG_PATH_MAX + 32], tkey[MOQ_CFG_PATH_MAX + 32];
	struct moq_quic_tls *t;
	int fd, rc, qerr = 0;

	snprintf(cert, sizeof(cert), "%s/dev-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/dev-key.pem", dir);
	snprintf(lock, sizeof(lock), "%s/dev-cert.lock", dir);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		dfail(err, errlen, "cannot lock", lock, errno);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	*made = 0;
	t = load_kept(cert, key, avoid, renew_before);
	if (t == NULL) {
		/* a new pair: written beside, then renamed over the old one (a
		 * reader without the lock never sees half a file) */
		snprintf(tcert, sizeof(tcert), "%s.%d.tmp", cert, (int)getpid());
		snprintf(tkey, sizeof(tkey), "%s.%d.tmp", key, (int)getpid());
		rc = moq_quic_tls_dev_cert_write(tcert, tkey);
		if (rc == 0 && (rename(tkey, key) != 0 || rename(tcert, cert) != 0))
			rc = MOQ_ERR_IO;
		if (rc != 0) {
			snprintf(err, errlen, "--state-dir: cannot write the certificate to %s: %s",
			         dir, rc == MOQ_ERR_IO ? strerror(errno) : moq_err_str(rc));
			unlink(tcert);
			unlink(tkey);
		} else {
			t = moq_quic_tls_new(cert, key, &qerr);
			if (t == NULL)
				snprintf(err, errlen, "--state-dir: cannot load %s: %s", cert,
				         moq_err_str(qerr));
			*made = 1;
		}
	}
	flock(fd, LOCK_UN);
	close(fd);
	return t;
}
