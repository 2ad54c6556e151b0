/* forecast.c: the one forecaster (forecast.h): the least-squares fit that `analyze trend` reports
 * and the live monitor's ETA of a limit.
 *
 * Called by trend.c once per series and by the monitor's thread once a tick (src/cli/monitor.c).
 * Workload: a fit over at most a few hundred points. */
#include "forecast.h"

#include <math.h>
#include <string.h>

const char *const ms_limit_words[4] = {"reached", "predicted", "not_growing", "too_short"};

struct ms_fit ms_fit_line(const double *x, const double *y, int n)
{
    struct ms_fit f = {n, 0, 0, 0, 0};
    if (n < 2)
        return f;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    double sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx == 0)
        return f;
    f.slope = sxy / sxx;
    f.intercept = my - f.slope * mx;
    double ssres = 0;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (f.intercept + f.slope * x[i]);
        ssres += r * r;
    }
    f.r2 = syy > 0 ? 1.0 - ssres / syy : 1.0;
    if (n > 2)
        f.se = sqrt(ssres / (n - 2) / sxx);
    return f;
}

int ms_forecast_limit(const struct ms_fit *f, int reached, double limit, double span, double end,
                      double *at)
{
    int why = MS_LIMIT_PREDICTED;
    if (f->n < 3 || f->slope <= 0 || f->slope < 2 * f->se) {
        why = MS_LIMIT_NOT_GROWING;
    } else {
        double x = (limit - f->intercept) / f->slope;
        if (x - end > MS_FORECAST_MAX_EXTRAPOLATE * span)
            why = MS_LIMIT_TOO_SHORT;
        else
            *at = x;
    }
    return reached ? MS_LIMIT_REACHED : why;
}

void ms_forecast_init(struct ms_forecast *f)
{
    memset(f, 0, sizeof *f);
}

void ms_forecast_add(struct ms_forecast *f, uint64_t t_ns, int64_t value)
{
    if (!f->started) {
        f->started = 1;
        f->t0_ns = t_ns;
        f->first_sec = f->last_sec = 0;
        f->sec[0] = value;
        f->max = value;
        f->last_value = value;
        return;
    }
    uint64_t s = t_ns > f->t0_ns ? (t_ns - f->t0_ns) / 1000000000u : 0;
    if (s < f->last_sec)
        s = f->last_sec;
    while (f->last_sec < s) { /* each new second starts at the value it started with */
        f->last_sec++;
        f->sec[f->last_sec % MS_FORECAST_WINDOW] = f->last_value;
        if (f->last_sec - f->first_sec >= MS_FORECAST_WINDOW)
            f->first_sec = f->last_sec - MS_FORECAST_WINDOW + 1;
    }
    int64_t *slot = &f->sec[s % MS_FORECAST_WINDOW];
    if (value > *slot)
        *slot = value;
    if (value > f->max)
        f->max = value;
    f->last_value = value;
}

int ms_forecast_eta(const struct ms_forecast *f, double limit, uint64_t now_ns, double *eta_s,
                    struct ms_fit *fit)
{
    double x[MS_FORECAST_WINDOW] = {0}, y[MS_FORECAST_WINDOW] = {0};
    int n = 0;
    *eta_s = -1;
    memset(fit, 0, sizeof *fit);
    if (!f->started)
        return MS_LIMIT_NOT_GROWING;
    /* complete seconds only (the current one is still filling), the last half of them */
    uint64_t last = f->last_sec, first = f->first_sec;
    uint64_t total = last - first; /* complete seconds: [first, last) */
    uint64_t from = total > 6 ? last - total / 2 : first;
    for (uint64_t s = from; s < last; s++) {
        x[n] = (double)s + 1; /* the high-water of second s is reached by its end */
        y[n] = (double)f->sec[s % MS_FORECAST_WINDOW];
        n++;
    }
    *fit = ms_fit_line(x, y, n);
    double now_s = now_ns > f->t0_ns ? (double)(now_ns - f->t0_ns) / 1e9 : 0, at = -1;
    double span = n ? x[n - 1] - x[0] : 0;
    int why = ms_forecast_limit(fit, (double)f->max >= limit, limit, span, now_s, &at);
    if (why == MS_LIMIT_REACHED)
        *eta_s = 0;
    else if (why == MS_LIMIT_PREDICTED)
        *eta_s = at > now_s ? at - now_s : 0;
    return why;
}

void ms_forecast_series(const double *x, const double *y, int n, double limit,
                        struct ms_series_forecast *out)
{
    int first = n > 0 ? (n - 1) / 2 : 0, reached = 0;
    for (int i = 0; i < n; i++)
        if (y[i] >= limit)
            reached = 1;
    out->fit = ms_fit_line(x + first, y + first, n - first);
    out->at = -1;
    double end = n ? x[n - 1] : 0;
    out->status =
        ms_forecast_limit(&out->fit, reached, limit, end - (n ? x[first] : 0), end, &out->at);
}

void ms_forecast_steps(const double *step, const double *peak, const double *t, int n, double limit,
                       double now_s, struct ms_step_forecast *out)
{
    ms_forecast_series(step, peak, n, limit, &out->s);
    int first = n > 0 ? (n - 1) / 2 : 0;
    struct ms_fit pace = ms_fit_line(step + first, t + first, n - first);
    out->sec_per_step = pace.slope > 0 ? pace.slope : 0;
    out->eta_s = -1;
    if (out->s.status == MS_LIMIT_REACHED)
        out->eta_s = 0;
    else if (out->s.status == MS_LIMIT_PREDICTED && out->sec_per_step > 0) {
        double at = pace.intercept + pace.slope * out->s.at;
        out->eta_s = at > now_s ? at - now_s : 0;
    } else if (out->s.status == MS_LIMIT_PREDICTED)
        out->s.status = MS_LIMIT_TOO_SHORT; /* a step number, but no time to it */
}
