// A small raster plotter: filled rectangles, lines, stb_easy_font text, written as PNG by
// stb_image_write.
#include "io/plot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>
#include <stb/stb_easy_font.h>

#include "bio/prediction.h"
#include "bioinfer/error.h"
#include "io/atomic_file.h"

namespace bioinfer::io {

namespace {

struct Rgb {
    uint8_t r, g, b;
};

struct Canvas {
    int w, h;
    std::vector<uint8_t> px;
    Canvas(int w_, int h_) : w(w_), h(h_), px(size_t(w_ * h_ * 3), 255) {}
    void fill(int x0, int y0, int x1, int y1, Rgb c) {  // [x0, x1) x [y0, y1)
        x0 = std::clamp(x0, 0, w), x1 = std::clamp(x1, 0, w);
        y0 = std::clamp(y0, 0, h), y1 = std::clamp(y1, 0, h);
        for (int y = y0; y < y1; ++y)
            for (int x = x0; x < x1; ++x) {
                uint8_t* p = &px[size_t((y * w + x) * 3)];
                p[0] = c.r, p[1] = c.g, p[2] = c.b;
            }
    }
    void line(double x0, double y0, double x1, double y1, Rgb c) {
        const int n = int(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0))) + 1;
        for (int i = 0; i <= n; ++i) {
            const double t = double(i) / n;
            const int x = int(std::lround(x0 + t * (x1 - x0))), y = int(std::lround(y0 + t * (y1 - y0)));
            fill(x, y, x + 2, y + 2, c);
        }
    }
    void text(int x, int y, const std::string& s, int scale = 2) {
        std::vector<char> buf(s.begin(), s.end());
        buf.push_back('\0');
        std::vector<float> quads(s.size() * 300);
        const int n = stb_easy_font_print(0, 0, buf.data(), nullptr, quads.data(),
                                          int(quads.size() * sizeof(float)));
        for (int q = 0; q < n; ++q) {  // 4 vertices of 16 bytes (x, y, z, rgba)
            const float* v = &quads[size_t(q) * 16];
            fill(x + int(v[0]) * scale, y + int(v[1]) * scale, x + int(v[8]) * scale,
                 y + int(v[9]) * scale, {0, 0, 0});
        }
    }
    static int text_width(const std::string& s, int scale = 2) {
        std::vector<char> buf(s.begin(), s.end());
        buf.push_back('\0');
        return stb_easy_font_width(buf.data()) * scale;
    }
};

// AlphaFold's pLDDT bands: very high, confident, low, very low.
Rgb plddt_colour(float v) {
    if (v > 90) return {0, 83, 214};
    if (v > 70) return {101, 203, 243};
    if (v > 50) return {255, 219, 19};
    return {255, 125, 69};
}

// PAE from dark green (0) to white (max).
Rgb pae_colour(float v, float max) {
    const float t = std::clamp(v / max, 0.0f, 1.0f);
    return {uint8_t(std::lround(0 + t * 255)), uint8_t(std::lround(100 + t * 155)),
            uint8_t(std::lround(0 + t * 255))};
}

}  // namespace

void write_confidence_png(const std::string& path, const std::string& title,
                          const std::vector<float>& plddt, const std::vector<float>& pae,
                          const std::vector<int64_t>& chain_starts, float max_pae) {
    const int64_t L = int64_t(plddt.size());
    BI_CHECK(L > 0 && int64_t(pae.size()) == L * L, path, "expected ", L, " pLDDT values and an ",
             L, " x ", L, " PAE matrix");
    const int panel = 420, margin = 70, top = 60;
    Canvas c(2 * (panel + margin) + margin, panel + top + margin);
    c.text(margin, 14, title, 2);

    // Left: pLDDT per residue, with the band thresholds.
    const int x0 = margin, y0 = top;
    const auto px = [&](double i) { return x0 + (L > 1 ? i / double(L - 1) : 0.5) * panel; };
    const auto py = [&](double v) { return y0 + (100.0 - v) / 100.0 * panel; };
    for (int band : {50, 70, 90}) c.line(x0, py(band), x0 + panel, py(band), {210, 210, 210});
    for (int64_t s : chain_starts) c.line(px(double(s)), y0, px(double(s)), y0 + panel, {150, 150, 150});
    for (int64_t i = 0; i + 1 < L; ++i)
        c.line(px(double(i)), py(plddt[size_t(i)]), px(double(i + 1)), py(plddt[size_t(i + 1)]),
               plddt_colour(0.5f * (plddt[size_t(i)] + plddt[size_t(i + 1)])));
    if (L == 1) c.fill(int(px(0)) - 2, int(py(plddt[0])) - 2, int(px(0)) + 2, int(py(plddt[0])) + 2, plddt_colour(plddt[0]));
    c.line(x0, y0, x0, y0 + panel, {0, 0, 0});
    c.line(x0, y0 + panel, x0 + panel, y0 + panel, {0, 0, 0});
    for (int v : {0, 50, 70, 90, 100}) c.text(x0 - 8 - Canvas::text_width(std::to_string(v)), int(py(v)) - 6, std::to_string(v));
    c.text(x0, y0 + panel + 10, "1", 2);
    c.text(x0 + panel - Canvas::text_width(std::to_string(L)), y0 + panel + 10, std::to_string(L));
    c.text(x0 + panel / 2 - 60, y0 - 24, "pLDDT per residue");

    // Right: PAE matrix (row: aligned residue, column: scored residue).
    const int x1 = 2 * margin + panel;
    for (int y = 0; y < panel; ++y)
        for (int x = 0; x < panel; ++x) {
            const int64_t i = std::min<int64_t>(L - 1, int64_t(y) * L / panel);
            const int64_t j = std::min<int64_t>(L - 1, int64_t(x) * L / panel);
            c.fill(x1 + x, y0 + y, x1 + x + 1, y0 + y + 1, pae_colour(pae[size_t(i * L + j)], max_pae));
        }
    for (int64_t s : chain_starts) {
        const double f = double(s) / double(L) * panel;
        c.line(x1 + f, y0, x1 + f, y0 + panel, {0, 0, 0});
        c.line(x1, y0 + f, x1 + panel, y0 + f, {0, 0, 0});
    }
    c.text(x1 + panel / 2 - 100, y0 - 24, "predicted aligned error");
    // colour bar
    const int bx = x1 + panel + 12;
    for (int y = 0; y < panel; ++y)
        c.fill(bx, y0 + y, bx + 14, y0 + y + 1, pae_colour(max_pae * float(y) / float(panel - 1), max_pae));
    c.text(bx, y0 + panel + 10, std::to_string(int(max_pae)) + " A");
    c.text(bx, y0 - 18, "0");

    int len = 0;
    unsigned char* png = stbi_write_png_to_mem(c.px.data(), c.w * 3, c.w, c.h, 3, &len);
    BI_CHECK(png != nullptr, path, "PNG encoding failed");
    const std::string bytes(reinterpret_cast<const char*>(png), size_t(len));
    STBIW_FREE(png);
    write_file_atomic(path, bytes);
}

void write_confidence_png(const std::string& path, const std::string& title,
                          const bio::Prediction& p, size_t sample) {
    BI_CHECK(sample < p.samples.size() && p.samples[sample].pae.defined(), path,
             "the prediction has no sample ", sample, " with a PAE matrix");
    const bio::Sample& s = p.samples[sample];
    const int64_t n = int64_t(p.tokens.size());
    std::vector<float> plddt(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) plddt[size_t(i)] = 100.0f * s.token_plddt.f32()[i];
    const std::vector<float> pae(s.pae.f32(), s.pae.f32() + n * n);
    std::vector<int64_t> chain_starts;
    for (size_t c = 1; c < p.chains.size(); ++c) chain_starts.push_back(p.chains[c].first_token);
    write_confidence_png(path, title, plddt, pae, chain_starts);
}

}  // namespace bioinfer::io
