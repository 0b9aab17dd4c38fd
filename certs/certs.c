#include "certs/certs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/strutil.h"

#define CERTS_MAX_DAYS 36500 /* a century; beyond that ASN.1 times get awkward */
#define CERTS_BACKDATE 300   /* seconds of clock skew tolerated between nodes */

/* OpenSSL's first queued error, for messages. */
static const char *ossl_reason(void)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown OpenSSL error";
}

/* A DNS name of labels (lower case), optionally starting with "*.". */
static bool is_dns_name(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 253)
        return false;
    if (!strncmp(s, "*.", 2))
        s += 2;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (!gq_is_dns_label_n(s, n))
            return false;
        if (!dot)
            return true;
        s = dot + 1;
    }
}

static bool is_ip(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static EVP_PKEY *new_key(void)
{
    return EVP_EC_gen("P-256");
}

static bool set_random_serial(X509 *x)
{
    bool ok = false;
    BIGNUM *bn = BN_new();
    /* 159 bits keeps the DER INTEGER positive within the 20-octet limit. */
    if (bn && BN_rand(bn, 159, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY))
        ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    return ok;
}

static bool add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* What one certificate says: its subject, its issuer (NULL, NULL: a
 * self-signed CA), its validity and its SANs (NULL: none). */
typedef struct cert_spec {
    const char *cn;
    X509 *issuer;
    EVP_PKEY *issuer_key;
    time_t not_before, not_after;
    const char *sans;
} cert_spec;

/* Build and sign one certificate for key. */
static gq_code make_cert(const cert_spec *s, EVP_PKEY *key, X509 **out, gq_err *err)
{
    const char *cn = s->cn, *sans = s->sans;
    X509 *issuer = s->issuer;
    EVP_PKEY *issuer_key = s->issuer_key;
    time_t not_before = s->not_before, not_after = s->not_after;
    bool is_ca = !issuer;
    gq_code rc = GQ_OK;
    X509V3_CTX ctx;
    X509 *x = X509_new();
    X509_NAME *name = NULL;
    if (!x || !X509_set_version(x, 2) || !set_random_serial(x) ||
        !ASN1_TIME_set(X509_getm_notBefore(x), not_before) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), not_after) || !X509_set_pubkey(x, key)) {
        rc = gq_err_set(err, GQ_ETLS, "cannot build certificate: %s", ossl_reason());
        goto out;
    }
    name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name)) {
        rc = gq_err_set(err, GQ_ETLS, "cannot set certificate names: %s", ossl_reason());
        goto out;
    }
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
    bool ok = add_ext(x, &ctx, NID_subject_key_identifier, "hash");
    if (is_ca) {
        ok = ok && add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        /* EC keys sign; keyEncipherment is for RSA key transport only. */
        ok = ok && add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") &&
             add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") &&
             add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") &&
             add_ext(x, &ctx, NID_subject_alt_name, sans);
    }
    if (!ok || !X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256())) {
        rc = gq_err_set(err, GQ_ETLS, "cannot sign certificate: %s", ossl_reason());
        goto out;
    }
    *out = x;
    x = NULL;
out:
    X509_free(x);
    return rc;
}

typedef int (*pem_writer)(FILE *f, void *obj);

static int write_cert(FILE *f, void *obj)
{
    return PEM_write_X509(f, obj);
}

static int write_key(FILE *f, void *obj)
{
    return PEM_write_PrivateKey(f, obj, NULL, NULL, 0, NULL, NULL);
}

/* dir/name replaced atomically: write a temporary file in the same
 * directory, fsync, rename over the target. */
static gq_code write_atomic(const char *dir, const char *name, mode_t mode, pem_writer fn,
                            void *obj, gq_err *err)
{
    gq_code rc = GQ_OK;
    char path[4096], tmp[4096];
    FILE *f = NULL;
    int fd = -1;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
        (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp))
        return gq_err_set(err, GQ_EINVAL, "%s: path too long", dir);
    fd = mkstemp(tmp);
    if (fd < 0)
        return gq_err_set(err, GQ_EIO, "%s: %s", tmp, strerror(errno));
    if (fchmod(fd, mode) != 0 || !(f = fdopen(fd, "w"))) {
        rc = gq_err_set(err, GQ_EIO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1; /* owned by f now */
    if (!fn(f, obj)) {
        rc = gq_err_set(err, GQ_ETLS, "%s: cannot encode PEM: %s", path, ossl_reason());
        goto out;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = gq_err_set(err, GQ_EIO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    int closed = fclose(f);
    f = NULL;
    if (closed != 0 || rename(tmp, path) != 0) {
        rc = gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
out:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (rc)
        unlink(tmp);
    return rc;
}

typedef void *(*pem_reader)(FILE *f);

static void *read_cert(FILE *f)
{
    return PEM_read_X509(f, NULL, NULL, NULL);
}

static void *read_key(FILE *f)
{
    return PEM_read_PrivateKey(f, NULL, NULL, NULL);
}

/* The object in the PEM file at path, NULL when unreadable. */
static void *read_pem(const char *path, pem_reader fn)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    void *obj = fn(f);
    fclose(f);
    return obj;
}

/* The CA in dir, if it is usable until `until`. NULL (nothing loaded)
 * otherwise; *why says why. */
static bool load_ca(const char *dir, time_t now, time_t until, X509 **ca, EVP_PKEY **ca_key,
                    const char **why)
{
    char cpath[4096], kpath[4096];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    snprintf(cpath, sizeof(cpath), "%s/ca.crt", dir);
    snprintf(kpath, sizeof(kpath), "%s/ca.key", dir);
    x = read_pem(cpath, read_cert);
    k = x ? read_pem(kpath, read_key) : NULL;
    if (!x || !k) {
        *why = "no readable ca.crt and ca.key";
    } else if (X509_check_private_key(x, k) != 1) {
        *why = "ca.key does not match ca.crt";
    } else if (!(X509_get_extension_flags(x) & EXFLAG_CA)) {
        *why = "ca.crt is not a CA certificate";
    } else if (X509_cmp_time(X509_get0_notBefore(x), &now) > 0) {
        *why = "ca.crt is not valid yet";
    } else if (X509_cmp_time(X509_get0_notAfter(x), &until) <= 0) {
        *why = "ca.crt expires before the new serving certificate would";
    } else {
        *ca = x;
        *ca_key = k;
        return true;
    }
    ERR_clear_error();
    X509_free(x);
    EVP_PKEY_free(k);
    return false;
}

static gq_code build_sans(const certs_options *o, char *buf, size_t cap, gq_err *err)
{
    const char *svc = o->service, *ns = o->ns;
    int n = snprintf(buf, cap, "DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local", svc,
                     svc, ns, svc, ns, svc, ns);
    if (n < 0 || (size_t)n >= cap)
        return gq_err_set(err, GQ_EINVAL, "subject alternative names too long");
    size_t len = (size_t)n;
    for (size_t i = 0; i < o->n_extra_sans; i++) {
        const char *s = o->extra_sans[i];
        bool ip = is_ip(s);
        if (!ip && !is_dns_name(s))
            return gq_err_set(err, GQ_EINVAL,
                              "--san %s: not an IP address or a lower-case DNS name", s);
        n = snprintf(buf + len, cap - len, ",%s:%s", ip ? "IP" : "DNS", s);
        if (n < 0 || (size_t)n >= cap - len)
            return gq_err_set(err, GQ_EINVAL, "subject alternative names too long");
        len += (size_t)n;
    }
    return GQ_OK;
}

/* A new key and its certificate as spec says, written to dir as NAME.key
 * and NAME.crt. *key and *cert are the caller's to free, also on failure. */
static gq_code issue(const char *dir, const char *name, const cert_spec *spec, EVP_PKEY **key,
                     X509 **cert, gq_err *err)
{
    char key_file[32], cert_file[32];
    *key = new_key();
    if (!*key)
        return gq_err_set(err, GQ_ETLS, "cannot make a key: %s", ossl_reason());
    gq_code rc = make_cert(spec, *key, cert, err);
    if (rc)
        return rc;
    /* Key first: a server polling the pair sees a mismatch at worst, keeps
     * its old pair and picks up the new one when the certificate lands. */
    snprintf(key_file, sizeof(key_file), "%s.key", name);
    snprintf(cert_file, sizeof(cert_file), "%s.crt", name);
    rc = write_atomic(dir, key_file, 0600, write_key, *key, err);
    return rc ? rc : write_atomic(dir, cert_file, 0644, write_cert, *cert, err);
}

/* The names, directory and validity the caller asked for, before anything
 * is written. */
static gq_code check_options(const certs_options *o, gq_err *err)
{
    if (!o->service || !gq_is_dns_label_n(o->service, strlen(o->service)) ||
        (o->service[0] >= '0' && o->service[0] <= '9'))
        return gq_err_set(err, GQ_EINVAL, "--service %s: not a valid Service name",
                          o->service ? o->service : "(missing)");
    if (!o->ns || !gq_is_dns_label_n(o->ns, strlen(o->ns)))
        return gq_err_set(err, GQ_EINVAL, "--namespace %s: not a valid namespace name",
                          o->ns ? o->ns : "(missing)");
    if (!o->out_dir || !*o->out_dir)
        return gq_err_set(err, GQ_EINVAL, "--out DIR is required");
    if (o->days <= 0 || o->days > CERTS_MAX_DAYS || o->ca_days <= 0 || o->ca_days > CERTS_MAX_DAYS)
        return gq_err_set(err, GQ_EINVAL, "validity must be 1..%d days", CERTS_MAX_DAYS);
    if (o->n_extra_sans > CERTS_MAX_SANS)
        return gq_err_set(err, GQ_EINVAL, "at most %d extra SANs", CERTS_MAX_SANS);
    return GQ_OK;
}

/* The CA in out_dir if it is good until end, else a new one (never under
 * --rotate); *created says which. */
static gq_code ensure_ca(const certs_options *o, time_t end, X509 **ca, EVP_PKEY **ca_key,
                         bool *created, gq_err *err)
{
    const char *why = NULL;
    char cn[300];
    if (load_ca(o->out_dir, o->now, end, ca, ca_key, &why))
        return GQ_OK;
    if (o->rotate)
        return gq_err_set(err, GQ_ENOTFOUND,
                          "%s: %s; --rotate never replaces the CA (run generate without "
                          "--rotate to make a new one, then update the caBundle)",
                          o->out_dir, why);
    time_t ca_end = o->now + (time_t)o->ca_days * 86400;
    if (ca_end < end)
        ca_end = end;
    snprintf(cn, sizeof(cn), "gpuquota-ca %s.%s", o->service, o->ns);
    cert_spec spec = {.cn = cn, .not_before = o->now - CERTS_BACKDATE, .not_after = ca_end};
    gq_code rc = issue(o->out_dir, "ca", &spec, ca_key, ca, err);
    if (!rc)
        *created = true;
    return rc;
}

gq_code certs_generate(const certs_options *o, certs_result *result, gq_err *err)
{
    gq_code rc = GQ_OK;
    char sans[8192], cn[300];
    X509 *ca = NULL, *leaf = NULL;
    EVP_PKEY *ca_key = NULL, *key = NULL;
    certs_result res = {0};

    rc = check_options(o, err);
    if (!rc)
        rc = build_sans(o, sans, sizeof(sans), err);
    if (rc)
        return rc;
    /* A fresh output directory is the common case (first install); create
     * it private, as it will hold the CA key. */
    if (mkdir(o->out_dir, 0700) != 0 && errno != EEXIST)
        return gq_err_set(err, GQ_EIO, "--out %s: %s", o->out_dir, strerror(errno));

    time_t start = o->now - CERTS_BACKDATE;
    time_t end = o->now + (time_t)o->days * 86400;
    rc = ensure_ca(o, end, &ca, &ca_key, &res.ca_created, err);
    if (rc)
        goto out;

    snprintf(cn, sizeof(cn), "%s.%s.svc", o->service, o->ns);
    cert_spec spec = {.cn = cn,
                      .issuer = ca,
                      .issuer_key = ca_key,
                      .not_before = start,
                      .not_after = end,
                      .sans = sans};
    rc = issue(o->out_dir, "tls", &spec, &key, &leaf, err);
    if (rc)
        goto out;
    res.not_after = end;
    if (result)
        *result = res;
out:
    X509_free(leaf);
    EVP_PKEY_free(key);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return rc;
}

/* ------------------------------------------------------------- inspect */

static void name_to_text(const X509_NAME *name, char *buf, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    buf[0] = '\0';
    if (!b)
        return;
    /* RFC 2253 with control characters escaped: safe to print. */
    if (X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0) {
        int n = BIO_read(b, buf, (int)cap - 1);
        buf[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

static void append(char *buf, size_t cap, size_t *len, const char *s)
{
    for (; *s && *len + 1 < cap; s++)
        buf[(*len)++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    buf[*len] = '\0';
}

static void sans_to_text(X509 *x, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);
        char tmp[300];
        tmp[0] = '\0';
        if (gn->type == GEN_DNS) {
            const ASN1_STRING *s = gn->d.dNSName;
            int n = ASN1_STRING_length(s);
            if (n < 0 || n > 255)
                n = 255;
            memcpy(tmp, "DNS:", 4);
            memcpy(tmp + 4, ASN1_STRING_get0_data(s), (size_t)n);
            tmp[4 + n] = '\0';
        } else if (gn->type == GEN_IPADD) {
            const ASN1_OCTET_STRING *s = gn->d.iPAddress;
            char ip[INET6_ADDRSTRLEN] = "?";
            int n = ASN1_STRING_length(s);
            if (n == 4 || n == 16)
                inet_ntop(n == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), ip, sizeof(ip));
            snprintf(tmp, sizeof(tmp), "IP:%s", ip);
        } else {
            continue;
        }
        if (len)
            append(buf, cap, &len, ", ");
        append(buf, cap, &len, tmp);
    }
    GENERAL_NAMES_free(names);
}

static time_t asn1_to_time(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || !ASN1_TIME_to_tm(t, &tm))
        return 0;
    return timegm(&tm);
}

typedef gq_code (*cert_fn)(void *ud, X509 *x, size_t n, gq_err *err);

/* Every PEM certificate of f, in order, to fn (n counts from 1; x is
 * borrowed); a file without one is an error naming path. */
static gq_code each_cert(FILE *f, const char *path, cert_fn fn, void *ud, gq_err *err)
{
    gq_code rc = GQ_OK;
    size_t n = 0;
    X509 *x;
    while (!rc && (x = PEM_read_X509(f, NULL, NULL, NULL))) {
        rc = fn(ud, x, ++n, err);
        X509_free(x);
    }
    ERR_clear_error(); /* the loop ends on "no start line" */
    if (!rc && n == 0)
        rc = gq_err_set(err, GQ_EINVAL, "%s: no PEM certificate found", path);
    return rc;
}

typedef struct info_list {
    certs_info *v;
    size_t n, cap;
} info_list;

static gq_code add_info(void *ud, X509 *x, size_t n, gq_err *err)
{
    info_list *l = ud;
    (void)n;
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 4;
        certs_info *nl = realloc(l->v, ncap * sizeof(*nl));
        if (!nl)
            return gq_err_oom(err);
        l->v = nl;
        l->cap = ncap;
    }
    certs_info *ci = &l->v[l->n++];
    memset(ci, 0, sizeof(*ci));
    name_to_text(X509_get_subject_name(x), ci->subject, sizeof(ci->subject));
    name_to_text(X509_get_issuer_name(x), ci->issuer, sizeof(ci->issuer));
    sans_to_text(x, ci->sans, sizeof(ci->sans));
    ci->not_before = asn1_to_time(X509_get0_notBefore(x));
    ci->not_after = asn1_to_time(X509_get0_notAfter(x));
    ci->is_ca = (X509_get_extension_flags(x) & EXFLAG_CA) != 0;
    return GQ_OK;
}

gq_code certs_inspect_file(const char *path, certs_info **out, size_t *n_out, gq_err *err)
{
    info_list l = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    gq_code rc = each_cert(f, path, add_info, &l, err);
    fclose(f);
    if (rc) {
        free(l.v);
        return rc;
    }
    *out = l.v;
    *n_out = l.n;
    return GQ_OK;
}

typedef struct bundle {
    const char *path;
    BIO *b;
} bundle;

static gq_code add_ca(void *ud, X509 *x, size_t n, gq_err *err)
{
    bundle *bd = ud;
    if (!(X509_get_extension_flags(x) & EXFLAG_CA)) {
        char subject[256];
        name_to_text(X509_get_subject_name(x), subject, sizeof(subject));
        return gq_err_set(err, GQ_EINVAL, "%s: certificate %zu (%s) is not a CA certificate",
                          bd->path, n, subject);
    }
    if (PEM_write_bio_X509(bd->b, x) != 1)
        return gq_err_set(err, GQ_ETLS, "%s: cannot encode certificate %zu", bd->path, n);
    return GQ_OK;
}

gq_code certs_ca_bundle_pem(const char *path, char **pem, size_t *len, gq_err *err)
{
    gq_code rc = GQ_OK;
    bundle bd = {path, NULL};
    struct stat st;
    FILE *f = fopen(path, "r");
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0) {
        rc = gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = gq_err_set(err, GQ_EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > CERTS_MAX_BUNDLE) {
        rc = gq_err_set(err, GQ_ELIMIT, "%s: larger than %d bytes", path, CERTS_MAX_BUNDLE);
        goto out;
    }
    bd.b = BIO_new(BIO_s_mem());
    if (!bd.b) {
        rc = gq_err_oom(err);
        goto out;
    }
    if ((rc = each_cert(f, path, add_ca, &bd, err)))
        goto out;
    char *data;
    long dlen = BIO_get_mem_data(bd.b, &data);
    char *copy = dlen > 0 ? malloc((size_t)dlen + 1) : NULL;
    if (!copy) {
        rc = gq_err_oom(err);
        goto out;
    }
    memcpy(copy, data, (size_t)dlen);
    copy[dlen] = '\0';
    *pem = copy;
    *len = (size_t)dlen;
out:
    ERR_clear_error();
    BIO_free(bd.b);
    fclose(f);
    return rc;
}

typedef struct merged {
    STACK_OF(X509) * kept;
    time_t now;
    bool first; /* the current CA: kept whatever its dates */
} merged;

static gq_code keep_cert(void *ud, X509 *x, size_t n, gq_err *err)
{
    (void)n;
    merged *m = ud;
    if (!(X509_get_extension_flags(x) & EXFLAG_CA))
        return GQ_OK;
    if (!m->first && X509_cmp_time(X509_get0_notAfter(x), &m->now) <= 0)
        return GQ_OK; /* expired: trusted no more */
    for (int i = 0; i < sk_X509_num(m->kept); i++)
        if (!X509_cmp(sk_X509_value(m->kept, i), x))
            return GQ_OK;
    if (!X509_up_ref(x) || !sk_X509_push(m->kept, x)) {
        X509_free(x);
        return gq_err_oom(err);
    }
    return GQ_OK;
}

static int write_stack(FILE *f, void *obj)
{
    STACK_OF(X509) *st = obj;
    for (int i = 0; i < sk_X509_num(st); i++)
        if (!PEM_write_X509(f, sk_X509_value(st, i)))
            return 0;
    return 1;
}

gq_code certs_bundle_merge(const char *dir, const char *prev_path, time_t now, gq_err *err)
{
    merged m = {sk_X509_new_null(), now, true};
    gq_code rc = GQ_OK;
    char ca_path[4096];
    FILE *f = NULL;
    if (!m.kept)
        return gq_err_oom(err);
    if ((size_t)snprintf(ca_path, sizeof ca_path, "%s/ca.crt", dir) >= sizeof ca_path)
        rc = gq_err_set(err, GQ_EINVAL, "%s: path too long", dir);
    else if (!(f = fopen(ca_path, "r")))
        rc = gq_err_set(err, GQ_EIO, "%s: %s", ca_path, strerror(errno));
    if (f) {
        rc = each_cert(f, ca_path, keep_cert, &m, err);
        fclose(f);
    }
    if (!rc && sk_X509_num(m.kept) != 1)
        rc = gq_err_set(err, GQ_EINVAL, "%s: holds no CA certificate", ca_path);
    m.first = false;
    if (!rc && prev_path && (f = fopen(prev_path, "r"))) {
        gq_err ignore;
        gq_err_clear(&ignore);
        /* an empty or unreadable previous bundle adds nothing */
        if (each_cert(f, prev_path, keep_cert, &m, &ignore) == GQ_ENOMEM)
            rc = gq_err_oom(err);
        fclose(f);
    }
    if (!rc)
        rc = write_atomic(dir, "bundle.crt", 0644, write_stack, m.kept, err);
    ERR_clear_error();
    sk_X509_pop_free(m.kept, X509_free);
    return rc;
}

long certs_days_left(const certs_info *info, time_t now)
{
    double secs = difftime(info->not_after, now);
    long days = (long)(secs / 86400);
    if (secs < 0 && (double)days * 86400 != secs)
        days--; /* round toward minus infinity */
    return days;
}
