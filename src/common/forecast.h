/* forecast.h: the one forecaster of memscope (docs/monitor.md, "The forecast"): a least-squares
 * line through recent growth of live bytes and when it reaches a limit. Used by `analyze trend`
 * (over a finished run's series) and by the live monitor (`memscope run --metrics`, `monitor`,
 * `top`: over the peak of each step when the program marks steps, ms_forecast_steps, else over the
 * high-water of each second so far, ms_forecast), so that both say the same of the same series. */
#ifndef MS_FORECAST_H
#define MS_FORECAST_H

#include <stddef.h>
#include <stdint.h>

/* A fitted line y = intercept + slope * x over n points, with R^2 and the slope's standard
 * error (se, 0 when n < 3). */
struct ms_fit {
    int n;
    double slope, intercept, r2, se;
};

/* Least squares over (x[i], y[i]), i < n. A fit of fewer than 2 points (or of points that share
 * one x) has slope 0 and n set. Pure. */
struct ms_fit ms_fit_line(const double *x, const double *y, int n);

/* What a fit says of a limit. */
enum {
    MS_LIMIT_REACHED,     /* the series reached it */
    MS_LIMIT_PREDICTED,   /* the fit reaches it within MS_FORECAST_MAX_EXTRAPOLATE times the span */
    MS_LIMIT_NOT_GROWING, /* the fit falls or is flat, or its growth is not two standard errors */
    MS_LIMIT_TOO_SHORT,   /* the fit grows, but reaches the limit only beyond that: the series is
                             too short to say */
};
/* "reached", "predicted", "not_growing", "too_short", indexed by MS_LIMIT_*. */
extern const char *const ms_limit_words[4];

/* A prediction further from the end of the fitted span than this many times its length is an
 * extrapolation the data cannot support (a 21 ms run that predicts a limit hours later). */
#define MS_FORECAST_MAX_EXTRAPOLATE 10

/* What fit f over a span of x ending at end (seconds or steps) says of limit, given whether the
 * series reached it; *at: the x where the fit reaches it, when it grows and that is near enough
 * (also when the series reached it), else left alone. Returns MS_LIMIT_*. Pure. */
int ms_forecast_limit(const struct ms_fit *f, int reached, double limit, double span, double end,
                      double *at);

/* The live forecaster: the high-water of a series in each second (the last
 * MS_FORECAST_WINDOW seconds of them), fitted over the last half of the seconds seen (at
 * least 3: the start-up ramp, as in analyze trend, is left out once there is more). The caller
 * owns the struct; zero it (or ms_forecast_init) before the first add. No allocation. */
#define MS_FORECAST_WINDOW 240
struct ms_forecast {
    uint64_t t0_ns;                  /* the first sample's time */
    int64_t sec[MS_FORECAST_WINDOW]; /* high-water of second k, ring indexed by k % WINDOW */
    uint64_t first_sec, last_sec;    /* seconds since t0 held: [first_sec, last_sec] */
    int started;
    int64_t max; /* the highest value added */
    int64_t last_value;
};

void ms_forecast_init(struct ms_forecast *f);

/* Adds the value at time t_ns (CLOCK_MONOTONIC; earlier times than the last are taken as the
 * last's). */
void ms_forecast_add(struct ms_forecast *f, uint64_t t_ns, int64_t value);

/* The forecast of limit at time now_ns: returns MS_LIMIT_*, with *eta_s the seconds from now_ns
 * until the fit reaches the limit (MS_LIMIT_PREDICTED; 0 when reached) and *fit the fit (x in
 * seconds since t0). */
int ms_forecast_eta(const struct ms_forecast *f, double limit, uint64_t now_ns, double *eta_s,
                    struct ms_fit *fit);

/* The forecast of a whole series x[0..n-1] (increasing), y[0..n-1] against limit, as `analyze
 * trend` makes it of a run: the fit of the recent half (points (n-1)/2 .. n-1) and what it says
 * of the limit (reached: some y >= limit). The Python package's OOMDetector forecasts its
 * samples with it (memscope._native.forecast). Pure. */
struct ms_series_forecast {
    struct ms_fit fit;
    int status; /* MS_LIMIT_* */
    double at;  /* the x at which the fit reaches the limit, or -1 */
};
void ms_forecast_series(const double *x, const double *y, int n, double limit,
                        struct ms_series_forecast *out);

/* The forecast by steps, used instead of the time's when the program marks steps (memscope_step,
 * memscope.torch): the peak of each step (peak[i]) against its number (step[i], increasing),
 * fitted and judged as ms_forecast_series does, and when the step of the limit comes at the pace
 * of the same recent steps (t[i]: step i's end, seconds on the clock of now_s). Pure. */
struct ms_step_forecast {
    struct ms_series_forecast s; /* x: steps; s.at: the step at which the limit is reached */
    double sec_per_step;         /* the fitted pace, 0 when the steps' times do not advance */
    double eta_s; /* seconds from now_s to then: 0 when reached, -1 when not predicted */
};
void ms_forecast_steps(const double *step, const double *peak, const double *t, int n, double limit,
                       double now_s, struct ms_step_forecast *out);

#endif
