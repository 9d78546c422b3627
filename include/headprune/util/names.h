// Names of enum values, as config files and the command line spell them: one table per enum, read
// both ways. The first name of a row is the canonical one (to_string); the others are accepted
// aliases. Parsing treats '-' as '_' ("all-but-one" is "all_but_one"). Plain C++.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hp {

template <typename E>
class NameTable {
 public:
  // what: the noun used in errors ("attention type"); rows: value -> {canonical, aliases...}.
  NameTable(std::string what, std::initializer_list<std::pair<E, std::vector<std::string>>> rows)
      : what_(std::move(what)), rows_(rows) {}
  // Rows built from another table (score/scorers.h builds its names from the scorer rows).
  NameTable(std::string what, std::vector<std::pair<E, std::vector<std::string>>> rows)
      : what_(std::move(what)), rows_(std::move(rows)) {}

  const std::string& name(E e) const {
    for (const auto& r : rows_)
      if (r.first == e) return r.second.front();
    static const std::string unknown = "?";
    return unknown;
  }
  // Throws std::invalid_argument: "unknown WHAT 'S' (expected one of: a, b, c)".
  E parse(const std::string& s) const {
    std::string key = s;
    for (auto& c : key)
      if (c == '-') c = '_';
    for (const auto& r : rows_)
      for (const auto& n : r.second)
        if (n == key) return r.first;
    throw std::invalid_argument("unknown " + what_ + " '" + s + "' (expected one of: " + joined() + ")");
  }
  std::vector<E> values() const {
    std::vector<E> out;
    for (const auto& r : rows_) out.push_back(r.first);
    return out;
  }
  std::vector<std::string> names() const {  // canonical names, in table order
    std::vector<std::string> out;
    for (const auto& r : rows_) out.push_back(r.second.front());
    return out;
  }
  std::string joined(const std::string& sep = ", ") const {  // "a, b, c" for help texts
    std::string out;
    for (const auto& r : rows_) out += (out.empty() ? "" : sep) + r.second.front();
    return out;
  }

 private:
  std::string what_;
  std::vector<std::pair<E, std::vector<std::string>>> rows_;
};

}  // namespace hp
