/* test_forecast.c: src/common/forecast.c, the one forecaster of `analyze trend`, the live
 * monitor and the Python OOMDetector: the least-squares fit (slope, intercept, R^2, the slope's
 * standard error) on hand-computed series, the limit rule (reached, predicted, not growing within
 * two standard errors, too far to extrapolate), the series' recent half, the live forecaster's
 * per-second high-water, and the forecast by steps with its pace. */
#include "test.h"

#include "common/forecast.h"

#include <math.h>

#define CHECK_NEAR(a, b)                                                                       \
    do {                                                                                       \
        double near_a_ = (a), near_b_ = (b);                                                   \
        if (!(fabs(near_a_ - near_b_) <= 1e-9 * (1 + fabs(near_b_)))) {                        \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s == %s (%.12g != %.12g)\n", __FILE__, \
                    __LINE__, #a, #b, near_a_, near_b_);                                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void test_fit(void)
{
    double x[] = {0, 1, 2, 3, 4}, y[] = {5, 7, 9, 11, 13};
    struct ms_fit f = ms_fit_line(x, y, 5);
    CHECK_EQ(f.n, 5);
    CHECK_NEAR(f.slope, 2);
    CHECK_NEAR(f.intercept, 5);
    CHECK_NEAR(f.r2, 1);
    CHECK_NEAR(f.se, 0);

    /* by hand: mean (1.5, 2.5), sxx 5, sxy 4, residuals -0.3 0.9 -0.9 0.3 (1.8), syy 5 */
    double y2[] = {1, 3, 2, 4};
    f = ms_fit_line(x, y2, 4);
    CHECK_NEAR(f.slope, 0.8);
    CHECK_NEAR(f.intercept, 1.3);
    CHECK_NEAR(f.r2, 0.64);
    CHECK_NEAR(f.se, sqrt(0.18));

    f = ms_fit_line(x, y, 1);
    CHECK_EQ(f.n, 1);
    CHECK_NEAR(f.slope, 0);
    double same[] = {2, 2, 2};
    f = ms_fit_line(same, y, 3); /* one x: no line */
    CHECK_EQ(f.n, 3);
    CHECK_NEAR(f.slope, 0);
    f = ms_fit_line(x, y, 2);
    CHECK_NEAR(f.se, 0); /* n < 3 */
    CHECK_NEAR(f.slope, 2);
}

static void test_limit(void)
{
    double x[] = {0, 1, 2, 3, 4}, y[] = {5, 7, 9, 11, 13};
    struct ms_fit f = ms_fit_line(x, y, 5);
    double at = -7;
    CHECK_EQ(ms_forecast_limit(&f, 0, 25, 4, 4, &at), MS_LIMIT_PREDICTED);
    CHECK_NEAR(at, 10);
    at = -7; /* 97.5 is 93.5 past the end, over 10 spans of 4 */
    CHECK_EQ(ms_forecast_limit(&f, 0, 200, 4, 4, &at), MS_LIMIT_TOO_SHORT);
    CHECK_NEAR(at, -7);
    CHECK_EQ(ms_forecast_limit(&f, 1, 25, 4, 4, &at), MS_LIMIT_REACHED);
    /* growth within two standard errors (0.8 < 2 * 0.424) is not growth */
    double y2[] = {1, 3, 2, 4};
    struct ms_fit g = ms_fit_line(x, y2, 4);
    at = -7;
    CHECK_EQ(ms_forecast_limit(&g, 0, 5, 3, 3, &at), MS_LIMIT_NOT_GROWING);
    CHECK_NEAR(at, -7);
    double down[] = {9, 7, 5, 3, 1};
    g = ms_fit_line(x, down, 5);
    CHECK_EQ(ms_forecast_limit(&g, 0, 20, 4, 4, &at), MS_LIMIT_NOT_GROWING);
    CHECK_EQ(ms_forecast_limit(&g, 1, 20, 4, 4, &at), MS_LIMIT_REACHED);
    CHECK_STREQ(ms_limit_words[MS_LIMIT_TOO_SHORT], "too_short");
}

static void test_series(void)
{
    double x[10], y[10];
    for (int i = 0; i < 10; i++) {
        x[i] = i;
        y[i] = 100 + 10 * i;
    }
    struct ms_series_forecast s;
    ms_forecast_series(x, y, 10, 200, &s); /* fit over points 4..9 */
    CHECK_EQ(s.fit.n, 6);
    CHECK_EQ(s.status, MS_LIMIT_PREDICTED);
    CHECK_NEAR(s.at, 10);
    ms_forecast_series(x, y, 10, 150, &s);
    CHECK_EQ(s.status, MS_LIMIT_REACHED);
    CHECK_NEAR(s.at, 5);
    /* the recent half only: a start-up ramp before it does not count */
    double z[10] = {0, 5000, 9000, 9000, 9000, 9000, 9000, 9000, 9000, 9000};
    ms_forecast_series(x, z, 10, 20000, &s);
    CHECK_EQ(s.status, MS_LIMIT_NOT_GROWING);
    CHECK_NEAR(s.at, -1);
}

static void test_live(void)
{
    struct ms_forecast f;
    ms_forecast_init(&f);
    double eta = 5;
    struct ms_fit fit;
    CHECK_EQ(ms_forecast_eta(&f, 100, 0, &eta, &fit), MS_LIMIT_NOT_GROWING);
    CHECK_NEAR(eta, -1);
    /* 500 bytes more every half second for 20 s: second s's high-water is (2s+1) * 500 */
    const uint64_t t0 = 1000000000ull;
    for (int k = 0; k <= 40; k++)
        ms_forecast_add(&f, t0 + (uint64_t)k * 500000000ull, (int64_t)k * 500);
    CHECK_EQ(f.last_sec, 20);
    CHECK_EQ(f.max, 20000);
    CHECK_EQ(f.sec[7], 7500);
    /* the last half of the 20 complete seconds (10..19) at x = s + 1: y = 1000 x - 500 */
    CHECK_EQ(ms_forecast_eta(&f, 30000, t0 + 20000000000ull, &eta, &fit), MS_LIMIT_PREDICTED);
    CHECK_EQ(fit.n, 10);
    CHECK_NEAR(fit.slope, 1000);
    CHECK_NEAR(fit.intercept, -500);
    CHECK_NEAR(eta, 10.5);
    CHECK_EQ(ms_forecast_eta(&f, 15000, t0 + 20000000000ull, &eta, &fit), MS_LIMIT_REACHED);
    CHECK_NEAR(eta, 0);
    /* an earlier time counts as the last one's second */
    ms_forecast_add(&f, t0, 20100);
    CHECK_EQ(f.last_sec, 20);
    CHECK_EQ(f.sec[20 % MS_FORECAST_WINDOW], 20100);
}

static void test_steps(void)
{
    double step[8], peak[8], t[8];
    for (int i = 0; i < 8; i++) {
        step[i] = i + 1;
        peak[i] = 1000 * (i + 1);
        t[i] = 2 * (i + 1);
    }
    struct ms_step_forecast s;
    ms_forecast_steps(step, peak, t, 8, 12000, 16, &s);
    CHECK_EQ(s.s.status, MS_LIMIT_PREDICTED);
    CHECK_NEAR(s.s.at, 12);
    CHECK_NEAR(s.sec_per_step, 2);
    CHECK_NEAR(s.eta_s, 8); /* step 12 ends at 24 s */
    for (int i = 0; i < 8; i++)
        t[i] = 5; /* the steps' times do not advance: a step, but no time to it */
    ms_forecast_steps(step, peak, t, 8, 12000, 16, &s);
    CHECK_EQ(s.s.status, MS_LIMIT_TOO_SHORT);
    CHECK_NEAR(s.eta_s, -1);
    ms_forecast_steps(step, peak, t, 8, 8000, 16, &s);
    CHECK_EQ(s.s.status, MS_LIMIT_REACHED);
    CHECK_NEAR(s.eta_s, 0);
}

int main(void)
{
    test_fit();
    test_limit();
    test_series();
    test_live();
    test_steps();
    return 0;
}
