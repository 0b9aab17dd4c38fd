/* Kubernetes resource.Quantity: parsing, canonical formatting, exact
 * arithmetic. Values are mant * 10^exp10 with mant an int64 and exp10 >= -9;
 * intermediate results use 128-bit integers so that no step can wrap. Every
 * quantity this file returns is normalised: mant carries no trailing decimal
 * zero and zero is {0, 0}. See docs/quantity.md for where we deliberately
 * differ from ParseQuantity (no silent caps, no degenerate "." or "+"). */
#include "quota/quantity.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

/* Inputs longer than this are refused before scanning: no real quantity is
 * anywhere near it, and it keeps every index and exponent sum in int64. */
#define GQ_QUANTITY_INPUT_MAX 4096

/* Largest magnitude a mantissa may have: int64 runs to -2^63. */
#define MAG_MAX_POS ((u128)INT64_MAX)
#define MAG_MAX_NEG ((u128)INT64_MAX + 1)

/* INT64_MAX in nano units: the largest binary-SI value, as nanos. */
#define NANO_LIMIT ((u128)INT64_MAX * 1000000000u)

static const char accepted_forms[] =
    "a quantity is a number with an optional suffix: n u m k M G T P E (decimal SI), "
    "Ki Mi Gi Ti Pi Ei (binary SI) or an exponent such as e3 or E-6, "
    "e.g. \"500m\", \"1.5\", \"8Gi\", \"1e3\"";

/* 10^i for i in [0, 38]. */
static u128 pow10_u128(int i)
{
    u128 r = 1;
    while (i-- > 0)
        r *= 10;
    return r;
}

static u128 mag_of(int64_t v)
{
    return v < 0 ? (u128)(-(i128)v) : (u128)v;
}

/* Quote at most 40 bytes of the input, escaping anything that is not
 * printable ASCII, so error messages are safe to log and show in kubectl. */
static void quote_input(const char *s, size_t len, char *out, size_t cap)
{
    const size_t shown_max = 40;
    size_t o = 0, i;
    for (i = 0; i < len && i < shown_max && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        /* Quotes and backslashes too, so the quoted text cannot be misread. */
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    if (i < len && o + 3 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static gq_code syntax_error(gq_err *err, const char *s, size_t len, const char *why)
{
    char q[200];
    quote_input(s, len, q, sizeof(q));
    return gq_err_set(err, GQ_EINVAL, "invalid quantity \"%s\": %s; %s", q, why, accepted_forms);
}

/* Why a value with too many significant digits is refused. */
static const char too_precise[] =
    "it has more significant digits than a 64-bit integer holds "
    "(at most 9223372036854775807 times a power of ten, and no finer than 1n)";

static gq_code range_error(gq_err *err, const char *s, size_t len, const char *why)
{
    char q[200];
    quote_input(s, len, q, sizeof(q));
    return gq_err_set(err, GQ_ERANGE, "quantity \"%s\" is out of range: %s", q, why);
}

/* Build a normalised quantity from sign, magnitude and exponent. Fails when
 * the magnitude cannot be brought under the int64 limit or the exponent does
 * not fit exp10. */
static bool make_q(bool neg, u128 mag, int64_t exp, gq_qformat fmt, gq_quantity *out)
{
    if (mag == 0) {
        *out = (gq_quantity){0, 0, fmt};
        return true;
    }
    while (mag % 10 == 0) {
        mag /= 10;
        exp++;
    }
    if (mag > (neg ? MAG_MAX_NEG : MAG_MAX_POS) || exp > INT32_MAX || exp < -9)
        return false;
    out->mant = neg ? (int64_t)(-(i128)mag) : (int64_t)mag;
    out->exp10 = (int32_t)exp;
    out->format = fmt;
    return true;
}

/* Binary-SI values are byte counts: they must fit int64 (Kubernetes caps
 * them at 2^63-1 silently; we refuse instead). */
static bool binary_in_range(const gq_quantity *q)
{
    int64_t v;
    if (q->format != GQ_QFMT_BINARY_SI)
        return true;
    if (q->exp10 <= 0)
        return true;
    /* |mant| * 10^exp10 must fit; exp10 > 18 never does for non-zero mant. */
    if (q->exp10 > 18)
        return q->mant == 0;
    return !__builtin_mul_overflow(q->mant, (int64_t)pow10_u128(q->exp10), &v);
}

/* The digit string int[0..ni) ++ frac[0..nf), indexed from the left. */
typedef struct digits {
    const char *ip, *fp;
    size_t ni, nf;
} digits;

static int digit_at(const digits *d, size_t i)
{
    return i < d->ni ? d->ip[i] - '0' : d->fp[i - d->ni] - '0';
}

/* Decimal value D * 10^exp_s rounded away from zero to nano precision. */
static bool decimal_value(const digits *d, bool neg, int64_t exp_s, gq_qformat fmt,
                          gq_quantity *out, const char **why)
{
    size_t n_all = d->ni + d->nf, first = 0, last;
    while (first < n_all && digit_at(d, first) == 0)
        first++;
    if (first == n_all) {
        *out = (gq_quantity){0, 0, fmt};
        return true;
    }
    last = n_all - 1;
    while (digit_at(d, last) == 0)
        last--;
    int64_t n = (int64_t)(last - first + 1);
    int64_t e = exp_s - (int64_t)d->nf + (int64_t)(n_all - 1 - last);
    int64_t keep = n;
    bool round_up = false;
    if (e < -9) {
        int64_t drop = -9 - e;
        if (drop >= n) {
            /* Everything is finer than 1n: the value rounds up to 1n. */
            return make_q(neg, 1, -9, fmt, out);
        }
        keep = n - drop;
        e = -9;
        round_up = true; /* the last dropped digit is non-zero */
    }
    if (keep > 19) {
        *why = too_precise;
        return false;
    }
    u128 mag = 0;
    for (int64_t i = 0; i < keep; i++)
        mag = mag * 10 + (u128)digit_at(d, first + (size_t)i);
    if (round_up)
        mag++;
    if (!make_q(neg, mag, e, fmt, out)) {
        *why = e > INT32_MAX ? "its exponent is too large" : too_precise;
        return false;
    }
    return true;
}

/* Binary value D * 10^-nf * 2^shift, rounded away from zero to nano
 * precision. D * 2^shift is produced right to left in decimal; the digits
 * finer than 1n only decide whether to round up. */
static bool binary_value(const digits *d, bool neg, unsigned shift, gq_quantity *out,
                         const char **why)
{
    const int64_t g = (int64_t)d->nf - 9; /* digits below 1n */
    const u128 factor = (u128)1 << shift;
    u128 carry = 0, nanos = 0;
    bool sticky = false, over = false;
    int64_t j = 0;
    size_t left = d->ni + d->nf;
    while (left > 0 || carry > 0) {
        u128 c = carry;
        if (left > 0)
            c += (u128)digit_at(d, --left) * factor;
        int digit = (int)(c % 10);
        carry = c / 10;
        int64_t p = j - g;
        if (p < 0) {
            sticky |= digit != 0;
        } else if (digit != 0) {
            if (p > 28)
                over = true;
            else
                nanos += (u128)digit * pow10_u128((int)p);
            if (nanos > NANO_LIMIT)
                over = true;
        }
        j++;
    }
    if (sticky)
        nanos++;
    if (over || nanos > NANO_LIMIT) {
        *why = "binary-SI quantities must fit a signed 64-bit integer (at most "
               "9223372036854775807, just under 8Ei)";
        return false;
    }
    /* Like ParseQuantity: a binary value strictly between 0 and 1 becomes
     * decimal SI, as no binary suffix can express it. */
    gq_qformat fmt = nanos != 0 && nanos < 1000000000u ? GQ_QFMT_DECIMAL_SI : GQ_QFMT_BINARY_SI;
    if (!make_q(neg, nanos, -9, fmt, out)) {
        *why = too_precise;
        return false;
    }
    return true;
}

/* The digits of s[pos..len): an integer part, then a '.' and a fraction,
 * either possibly empty; the position after them. */
static size_t read_digits(const char *s, size_t len, size_t pos, digits *d)
{
    *d = (digits){s + pos, NULL, 0, 0};
    while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
        pos++;
        d->ni++;
    }
    d->fp = s + pos;
    if (pos < len && s[pos] == '.') {
        pos++;
        d->fp = s + pos;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            pos++;
            d->nf++;
        }
    }
    return pos;
}

/* What a suffix does to a quantity's digits. */
typedef struct qscale {
    gq_qformat fmt;
    int64_t exp;    /* times 10^exp */
    unsigned shift; /* times 2^shift (binary SI) */
} qscale;

/* The exponent of a suffix "e" or "E" suf[0..sl) of quantity s[0..len):
 * a signed integer that fits 32 bits. */
static gq_code read_exponent(const char *s, size_t len, const char *suf, size_t sl, int64_t *exp,
                             gq_err *err)
{
    size_t i = 1;
    bool eneg = false;
    if (i < sl && (suf[i] == '+' || suf[i] == '-'))
        eneg = suf[i++] == '-';
    if (i == sl)
        return syntax_error(err, s, len, "its exponent has no digits");
    int64_t v = 0;
    for (; i < sl; i++) {
        if (suf[i] < '0' || suf[i] > '9')
            return syntax_error(err, s, len, "its exponent is not an integer");
        v = v * 10 + (suf[i] - '0');
        if (v > INT32_MAX)
            return range_error(err, s, len, "the exponent does not fit 32 bits");
    }
    *exp = eneg ? -v : v;
    return GQ_OK;
}

/* The suffix s[pos..len) of quantity s: none, decimal SI, binary SI or an
 * exponent. */
static gq_code read_suffix(const char *s, size_t len, size_t pos, qscale *sc, gq_err *err)
{
    static const char dec_suffix[] = "numkMGTPE";
    static const int dec_exp[] = {-9, -6, -3, 3, 6, 9, 12, 15, 18};
    static const char bin_suffix[] = "KMGTPE";
    const char *suf = s + pos;
    size_t sl = len - pos;
    *sc = (qscale){GQ_QFMT_DECIMAL_SI, 0, 0};
    if (sl == 0)
        return GQ_OK; /* plain number */
    if (sl == 1 && suf[0] != '\0' && strchr(dec_suffix, suf[0])) {
        sc->exp = dec_exp[strchr(dec_suffix, suf[0]) - dec_suffix];
        return GQ_OK;
    }
    if (sl == 2 && suf[1] == 'i' && suf[0] != '\0' && strchr(bin_suffix, suf[0])) {
        sc->fmt = GQ_QFMT_BINARY_SI;
        sc->shift = 10u * (unsigned)(strchr(bin_suffix, suf[0]) - bin_suffix + 1);
        return GQ_OK;
    }
    if (suf[0] == 'e' || suf[0] == 'E') {
        sc->fmt = GQ_QFMT_DECIMAL_EXP;
        return read_exponent(s, len, suf, sl, &sc->exp, err);
    }
    char why[96], q[40];
    quote_input(suf, sl, q, sizeof(q));
    bool letter = (suf[0] >= 'a' && suf[0] <= 'z') || (suf[0] >= 'A' && suf[0] <= 'Z');
    snprintf(why, sizeof(why),
             letter ? "unknown suffix \"%s\" (suffixes are case-sensitive)"
                    : "unexpected \"%s\" after the number",
             q);
    return syntax_error(err, s, len, why);
}

gq_code gq_quantity_parse(const char *s, size_t len, gq_quantity *out, gq_err *err)
{
    if (!s || len == 0)
        return gq_err_set(err, GQ_EINVAL, "invalid quantity \"\": it is empty; %s", accepted_forms);
    if (len > GQ_QUANTITY_INPUT_MAX) {
        char q[200];
        quote_input(s, len, q, sizeof(q));
        return gq_err_set(err, GQ_ELIMIT, "quantity \"%s\" is longer than %d bytes", q,
                          GQ_QUANTITY_INPUT_MAX);
    }
    size_t pos = 0;
    bool neg = false;
    if (s[pos] == '+' || s[pos] == '-')
        neg = s[pos++] == '-';
    digits d;
    pos = read_digits(s, len, pos, &d);
    if (d.ni + d.nf == 0)
        return syntax_error(err, s, len, "it has no digits");
    qscale sc;
    gq_code rc = read_suffix(s, len, pos, &sc, err);
    if (rc)
        return rc;
    gq_quantity r;
    const char *why = "value too large";
    bool ok = sc.fmt == GQ_QFMT_BINARY_SI ? binary_value(&d, neg, sc.shift, &r, &why)
                                          : decimal_value(&d, neg, sc.exp, sc.fmt, &r, &why);
    if (!ok)
        return range_error(err, s, len, why);
    *out = r;
    return GQ_OK;
}

/* Append the decimal digits of mag to buf at *o. */
static void put_u128(char *buf, size_t *o, u128 mag)
{
    char tmp[40];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(mag % 10));
        mag /= 10;
    } while (mag);
    while (n)
        buf[(*o)++] = tmp[--n];
}

static void format_decimal(const gq_quantity *q, gq_qformat fmt, char *buf)
{
    u128 mag = mag_of(q->mant);
    int64_t e = q->exp10;
    size_t o = 0;
    while (mag % 10 == 0) {
        mag /= 10;
        e++;
    }
    /* Lower the exponent to a multiple of 3; at most two extra digits. */
    int64_t r = ((e % 3) + 3) % 3;
    mag *= pow10_u128((int)r);
    e -= r;
    if (q->mant < 0)
        buf[o++] = '-';
    put_u128(buf, &o, mag);
    if (fmt == GQ_QFMT_DECIMAL_SI && e >= -9 && e <= 18) {
        static const char sfx[] = "num kMGTPE";
        char c = sfx[(e + 9) / 3];
        if (c != ' ')
            buf[o++] = c;
        buf[o] = '\0';
        return;
    }
    /* Exponent form, also the fallback for decimal SI beyond "E" (as
     * Kubernetes does since it stopped dropping the magnitude there). */
    if (e != 0)
        snprintf(buf + o, GQ_QUANTITY_STR_MAX - o, "e%" PRId64, e);
    else
        buf[o] = '\0';
}

void gq_quantity_format(const gq_quantity *q, char buf[GQ_QUANTITY_STR_MAX])
{
    int64_t v;
    if (q->mant == 0) {
        memcpy(buf, "0", 2);
        return;
    }
    gq_qformat fmt = q->format;
    if (fmt == GQ_QFMT_BINARY_SI) {
        /* Binary SI only for whole values of at least 1024 in magnitude;
         * anything else would round or read oddly, so print decimal SI. */
        if (gq_quantity_to_int64_ceil(q, &v) != GQ_OK || !gq_quantity_is_integer(q) ||
            (v > -1024 && v < 1024)) {
            format_decimal(q, GQ_QFMT_DECIMAL_SI, buf);
            return;
        }
        u128 mag = mag_of(v);
        int k = 0;
        while (mag % 1024 == 0 && k < 6) {
            mag /= 1024;
            k++;
        }
        size_t o = 0;
        if (v < 0)
            buf[o++] = '-';
        put_u128(buf, &o, mag);
        if (k > 0) {
            buf[o++] = " KMGTPE"[k];
            buf[o++] = 'i';
        }
        buf[o] = '\0';
        return;
    }
    format_decimal(q, fmt == GQ_QFMT_DECIMAL_SI ? fmt : GQ_QFMT_DECIMAL_EXP, buf);
}

/* Number of decimal digits of a non-zero magnitude. */
static int ndigits(u128 m)
{
    int n = 0;
    while (m) {
        m /= 10;
        n++;
    }
    return n;
}

int gq_quantity_cmp(const gq_quantity *a, const gq_quantity *b)
{
    int sa = (a->mant > 0) - (a->mant < 0), sb = (b->mant > 0) - (b->mant < 0);
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (sa == 0)
        return 0;
    u128 ma = mag_of(a->mant), mb = mag_of(b->mant);
    /* Order of magnitude first; then the exponents differ by at most 18 and
     * the aligned magnitudes fit 128 bits. */
    int64_t oa = ndigits(ma) + (int64_t)a->exp10, ob = ndigits(mb) + (int64_t)b->exp10;
    int c;
    if (oa != ob) {
        c = oa < ob ? -1 : 1;
    } else {
        if (a->exp10 > b->exp10)
            ma *= pow10_u128(a->exp10 - b->exp10);
        else
            mb *= pow10_u128(b->exp10 - a->exp10);
        c = ma < mb ? -1 : ma > mb;
    }
    return sa > 0 ? c : -c;
}

bool gq_quantity_is_zero(const gq_quantity *q)
{
    return q->mant == 0;
}

bool gq_quantity_is_negative(const gq_quantity *q)
{
    return q->mant < 0;
}

/* a + sign*b, exact or GQ_ERANGE. */
static gq_code add_signed(const gq_quantity *a, const gq_quantity *b, bool negate_b,
                          gq_quantity *out)
{
    /* Like Quantity.Add/Sub: a zero left operand takes the other's format. */
    gq_qformat fmt = a->mant == 0 ? b->format : a->format;
    i128 ma = a->mant, mb = negate_b ? -(i128)b->mant : (i128)b->mant;
    int64_t ea = a->exp10, eb = b->exp10;
    while (ma != 0 && ma % 10 == 0) {
        ma /= 10;
        ea++;
    }
    while (mb != 0 && mb % 10 == 0) {
        mb /= 10;
        eb++;
    }
    i128 sum;
    int64_t e;
    if (ma == 0 || mb == 0) {
        sum = ma == 0 ? mb : ma;
        e = ma == 0 ? eb : ea;
    } else {
        /* With both mantissas ending in a non-zero digit, a gap of 20 or
         * more leaves a sum above 10^20 - 2^63 that still ends in a non-zero
         * digit: never representable. Up to 19 the aligned sum fits 128 bits. */
        int64_t gap = ea > eb ? ea - eb : eb - ea;
        if (gap > 19)
            return GQ_ERANGE;
        if (ea > eb)
            ma *= (i128)pow10_u128((int)gap);
        else
            mb *= (i128)pow10_u128((int)gap);
        sum = ma + mb;
        e = ea < eb ? ea : eb;
    }
    gq_quantity r;
    bool neg = sum < 0;
    if (!make_q(neg, neg ? (u128)(-sum) : (u128)sum, e, fmt, &r) || !binary_in_range(&r))
        return GQ_ERANGE;
    *out = r;
    return GQ_OK;
}

gq_code gq_quantity_add(const gq_quantity *a, const gq_quantity *b, gq_quantity *out)
{
    return add_signed(a, b, false, out);
}

gq_code gq_quantity_sub(const gq_quantity *a, const gq_quantity *b, gq_quantity *out)
{
    return add_signed(a, b, true, out);
}

gq_code gq_quantity_scale_ceil(const gq_quantity *q, int64_t num, int64_t den, gq_quantity *out)
{
    if (den <= 0)
        return GQ_EINVAL;
    bool neg = (q->mant < 0) != (num < 0);
    u128 p = mag_of(q->mant) * mag_of(num); /* < 2^126 */
    u128 dv = (u128)den;
    u128 mant = p / dv, rem = p % dv;
    int64_t e = q->exp10;
    /* Long division, one decimal digit at a time, down to 1n at most. */
    const u128 cap = pow10_u128(37);
    while (rem != 0 && e > -9) {
        if (mant >= cap)
            return GQ_ERANGE;
        rem *= 10;
        mant = mant * 10 + rem / dv;
        rem %= dv;
        e--;
    }
    if (rem != 0)
        mant++;
    gq_quantity r;
    if (!make_q(neg && mant != 0, mant, e, q->format, &r) || !binary_in_range(&r))
        return GQ_ERANGE;
    *out = r;
    return GQ_OK;
}

/* Value in units of 10^scale (scale in [-9, 0]... any), rounded away from
 * zero, if it fits int64. */
static gq_code to_scaled_ceil(const gq_quantity *q, int scale, int64_t *out)
{
    u128 mag = mag_of(q->mant);
    int64_t e = (int64_t)q->exp10 - scale;
    if (mag != 0 && e > 0) {
        if (e > 19)
            return GQ_ERANGE;
        mag *= pow10_u128((int)e);
    } else if (e < 0) {
        u128 div = pow10_u128((int)(e < -38 ? 38 : -e));
        bool inexact = mag % div != 0;
        mag = mag / div + inexact;
    }
    if (mag > (q->mant < 0 ? MAG_MAX_NEG : MAG_MAX_POS))
        return GQ_ERANGE;
    *out = q->mant < 0 ? (int64_t)(-(i128)mag) : (int64_t)mag;
    return GQ_OK;
}

gq_code gq_quantity_to_int64_ceil(const gq_quantity *q, int64_t *out)
{
    return to_scaled_ceil(q, 0, out);
}

gq_code gq_quantity_to_milli_ceil(const gq_quantity *q, int64_t *out)
{
    return to_scaled_ceil(q, -3, out);
}

bool gq_quantity_is_integer(const gq_quantity *q)
{
    if (q->exp10 >= 0 || q->mant == 0)
        return true;
    return mag_of(q->mant) % pow10_u128(q->exp10 < -38 ? 38 : -q->exp10) == 0;
}

gq_quantity gq_quantity_from_int64(int64_t v, gq_qformat format)
{
    gq_quantity r = {0, 0, format};
    /* Cannot fail: the magnitude is an int64's and the exponent small. */
    (void)make_q(v < 0, mag_of(v), 0, format, &r);
    return r;
}

void gq_format_bytes(int64_t bytes, char buf[GQ_QUANTITY_STR_MAX])
{
    gq_quantity q = gq_quantity_from_int64(bytes, GQ_QFMT_BINARY_SI);
    gq_quantity_format(&q, buf);
}
