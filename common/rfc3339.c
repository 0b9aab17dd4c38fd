#include "common/rfc3339.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

gq_code gq_time_parse_rfc3339_us(const char *s, int64_t *out, gq_err *err)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, se, oh = 0, om = 0, sign = 0;
    int64_t frac = 0;
    size_t len = strnlen(s, 64);
    if (len < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
        goto bad;
    size_t i = 19;
    if (s[i] == '.') {
        size_t j = ++i;
        /* Microseconds: digits past the sixth are truncated. */
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (i - j < 6)
                frac = frac * 10 + (s[i] - '0');
            i++;
        }
        if (i == j)
            goto bad;
        for (size_t n = i - j; n < 6; n++)
            frac *= 10;
    }
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == len) {
        sign = 0;
    } else if ((s[i] == '+' || s[i] == '-') && i + 6 == len && digits(s + i + 1, 2, &oh) &&
               s[i + 3] == ':' && digits(s + i + 4, 2, &om) && oh < 24 && om < 60) {
        sign = s[i] == '+' ? 1 : -1;
    } else {
        goto bad;
    }
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || se > 60)
        goto bad;
    int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
    t -= sign * (oh * 3600 + om * 60);
    *out = t * 1000000 + frac;
    return GQ_OK;
bad:
    return gq_err_set(err, GQ_EINVAL, "invalid RFC 3339 time \"%.40s\"", s);
}

gq_code gq_time_parse_rfc3339(const char *s, int64_t *out, gq_err *err)
{
    int64_t us;
    gq_code rc = gq_time_parse_rfc3339_us(s, &us, err);
    if (rc)
        return rc;
    /* Floor, so a fraction never moves a time before 1970 up a second. */
    *out = us / 1000000 - (us % 1000000 < 0);
    return GQ_OK;
}

void gq_time_format_rfc3339(int64_t t, char buf[GQ_RFC3339_MAX])
{ /* Years 0000..9999 only, as RFC 3339 allows: clamp instead of printing
   * something no parser accepts. */
    if (t < -62167219200LL)
        t = -62167219200LL;
    if (t > 253402300799LL)
        t = 253402300799LL;

    int64_t days = t / 86400, secs = t % 86400;
    if (secs < 0) {
        secs += 86400;
        days--;
    }
    /* civil_from_days (H. Hinnant). */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp + (mp < 10 ? 3 : -9);
    y += m <= 2;
    /* The modulos are no-ops after the clamp; they tell the compiler the width. */
    snprintf(buf, GQ_RFC3339_MAX, "%04u-%02u-%02uT%02u:%02u:%02uZ", (unsigned)y % 10000u,
             (unsigned)m % 100u, (unsigned)d % 100u, (unsigned)(secs / 3600) % 100u,
             (unsigned)(secs / 60 % 60) % 100u, (unsigned)(secs % 60) % 100u);
}

void gq_time_format_rfc3339_frac(int64_t unix_us, int frac_digits, char buf[GQ_RFC3339_MAX])
{
    int64_t secs = unix_us / 1000000, us = unix_us % 1000000;
    if (us < 0) {
        us += 1000000;
        secs--;
    }
    gq_time_format_rfc3339(secs, buf);
    if (frac_digits != 3 && frac_digits != 6)
        return;
    /* "...:05Z" -> "...:05.123456Z" */
    size_t n = strlen(buf) - 1;
    snprintf(buf + n, GQ_RFC3339_MAX - n, ".%0*dZ", frac_digits,
             (int)(frac_digits == 3 ? us / 1000 : us));
}
