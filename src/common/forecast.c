/* forecast.c: the one forecaster (forecast.h). Called by `memscope analyze trend` once per
 * series and by the Python OOMDetector once per sample (a few hundred points): pure arithmetic. */
#include "forecast.h"

#include <math.h>

const char *ms_limit_word(int status)
{
    static const char *const words[] = {"reached", "predicted", "not_growing", "too_short"};
    return status >= 0 && status <= MS_LIMIT_TOO_SHORT ? words[status] : "not_growing";
}

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

int ms_limit_status(const struct ms_fit *f, int reached, double limit, double span, double end,
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

void ms_forecast_series(const double *x, const double *y, int n, double limit,
                        struct ms_forecast *out)
{
    int first = n > 0 ? (n - 1) / 2 : 0, reached = 0;
    for (int i = 0; i < n; i++)
        if (y[i] >= limit)
            reached = 1;
    out->fit = ms_fit_line(x + first, y + first, n - first);
    out->at = -1;
    double end = n ? x[n - 1] : 0;
    out->status =
        ms_limit_status(&out->fit, reached, limit, end - (n ? x[first] : 0), end, &out->at);
}
