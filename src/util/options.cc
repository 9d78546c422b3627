// Option tables' ranges (see header).
#include "headprune/util/options.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hp {

namespace {

// An integral bound exactly ("1048576"), any other as %g ("0.5").
std::string bound(double v) {
  char buf[32];
  if (std::nearbyint(v) == v && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

}  // namespace

std::optional<double> parse_finite_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool ValueRange::contains(double v) const {
  if (!std::isfinite(v)) return false;
  if (std::isfinite(lo) && (lo_open ? !(v > lo) : !(v >= lo))) return false;
  if (std::isfinite(hi) && (hi_open ? !(v < hi) : !(v <= hi))) return false;
  return true;
}

std::string ValueRange::text() const {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi)
    return "in " + std::string(lo_open ? "(" : "[") + bound(lo) + ", " + bound(hi) + (hi_open ? ")" : "]");
  if (has_lo) return (lo_open ? "> " : ">= ") + bound(lo);
  if (has_hi) return (hi_open ? "< " : "<= ") + bound(hi);
  return "";
}

std::string ValueRange::requirement(bool integer) const {
  const std::string t = text();
  if (integer) return t.empty() ? "an integer" : "an integer " + t;
  return t.empty() ? "a finite number" : "a number " + t;
}

}  // namespace hp
