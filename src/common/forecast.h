/* forecast.h: the one forecaster of memscope: when a series of memory figures reaches a limit.
 * `memscope analyze trend --limit` (live bytes over a run), the Python package's OOMDetector
 * (a process's or device's usage sampled every 0.1 s, through memscope._native.forecast) and
 * the live monitor (issue 39) all predict with it, so they agree on the same samples.
 *
 * The method (docs/analyses.md, trend; docs/python.md, OOMDetector): a least-squares line over
 * the recent half of the series only (a start-up ramp or an earlier phase is not today's
 * growth), made robust in the two ways that matter for a warning: growth counts only when the
 * slope is at least two standard errors above zero (noise and a sawtooth that returns to its
 * level are "not growing"), and the limit is predicted only within MS_FORECAST_MAX_EXTRAPOLATE
 * times the span fitted past its end (further is "too short to say"). Pure functions over the
 * caller's arrays: nothing allocated, nothing printed. */
#ifndef MS_FORECAST_H
#define MS_FORECAST_H

/* A fitted line y = intercept + slope * x over n points; r2 its coefficient of determination,
 * se the standard error of the slope (0 when n < 3). */
struct ms_fit {
    int n;
    double slope, intercept, r2, se;
};

/* What a forecast says about the limit. */
enum {
    MS_LIMIT_REACHED,     /* the series reached it */
    MS_LIMIT_PREDICTED,   /* the fit reaches it within MAX_EXTRAPOLATE times the span fitted */
    MS_LIMIT_NOT_GROWING, /* the fit falls or is flat, or its growth is not two standard errors */
    MS_LIMIT_TOO_SHORT,   /* the fit grows, but reaches the limit only beyond that */
};

/* A prediction further from the end of the fitted span than this many times its length is an
 * extrapolation the data cannot support (a 21 ms run that predicts a limit hours later). */
#define MS_FORECAST_MAX_EXTRAPOLATE 10

/* The words of MS_LIMIT_* in JSON ("reached", "predicted", "not_growing", "too_short"). */
const char *ms_limit_word(int status);

/* Least squares over x[0..n-1], y[0..n-1]. Fewer than 2 points or all x equal: slope 0. */
struct ms_fit ms_fit_line(const double *x, const double *y, int n);

/* What fit f (over a span of x ending at end) says of limit, given whether the series reached
 * it: MS_LIMIT_*. *at: the x at which the fit reaches the limit when it grows significantly and
 * that is near enough (also when the series reached it), else left alone. */
int ms_limit_status(const struct ms_fit *f, int reached, double limit, double span, double end,
                    double *at);

/* The forecast of a series x[0..n-1] (increasing), y[0..n-1] against limit. */
struct ms_forecast {
    struct ms_fit fit; /* over the recent half: points (n-1)/2 .. n-1 */
    int status;        /* MS_LIMIT_* */
    double at;         /* the x at which the fit reaches the limit, or -1 */
};

/* Fits the recent half of the series and judges the limit (reached: some y >= limit). */
void ms_forecast_series(const double *x, const double *y, int n, double limit,
                        struct ms_forecast *out);

#endif
