// How closely an output agrees with its reference: Pearson correlation, max-abs and relative L2
// difference. Shared by the tests and by the op sweep's admission check.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bioinfer {

struct Agreement {
    double pcc = 0, max_abs = 0, rel_l2 = 0;
};

// got against ref over n values. Non-finite values in `got` make every measure NaN or inf, so a
// broken output never passes a threshold.
template <typename A, typename B>
Agreement agreement(const A* got, const B* ref, int64_t n) {
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < n; ++i) {
        sa += double(got[i]);
        sb += double(ref[i]);
    }
    const double ma = sa / double(n), mb = sb / double(n);
    double cov = 0, va = 0, vb = 0, diff2 = 0, ref2 = 0;
    Agreement s;
    for (int64_t i = 0; i < n; ++i) {
        const double x = double(got[i]) - ma, y = double(ref[i]) - mb;
        cov += x * y;
        va += x * x;
        vb += y * y;
        const double d = double(got[i]) - double(ref[i]);
        diff2 += d * d;
        ref2 += double(ref[i]) * double(ref[i]);
        s.max_abs = std::isnan(d) ? d : std::max(s.max_abs, std::fabs(d));
    }
    s.pcc = (va > 0 && vb > 0) ? cov / std::sqrt(va * vb) : (diff2 == 0 ? 1.0 : 0.0);
    if (std::isnan(diff2)) s.pcc = diff2;
    s.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    return s;
}

}  // namespace bioinfer
