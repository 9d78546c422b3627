// One row per option of a job's request, read by both front ends: the command line (cli/, CLI11) and
// the Python module's keyword arguments (python/jobs.cc, JSON). A row holds the keyword, the flag, the
// help, the admissible values and where the value lives in the request, so that a name, a bound or a
// default is written once. (Before, each front end restated them and they drifted apart: the Python
// module refused a negative Hard Concrete temperature only when the job reached it, in other words
// than the command line's, and took a gate distillation temperature that the job then overwrote.)
//
// A table is built next to the struct it fills (BenchOptions in eval/benchmark.h, BudgetShape in
// prune/budget.h, GateOptions in prune/gates.h, PlanSpec in prune/strategy.h, FinetuneOptions and
// DataSource in jobs/job.h, and each job's request in its jobs/*_job.h: importance_request_table()
// and the prune, curve, gates, export and train tables; docs/architecture.md "Job options"):
//
//   static const OptionTable<BenchOptions> t = OptionTable<BenchOptions>()
//       .integer("reps", "--reps", "timed repetitions per model and shape", &BenchOptions::reps, ValueRange::at_least(1))
//       .real("min_seconds", "--min-time", "...", &BenchOptions::min_seconds, ValueRange::between(0, 3600));
//
// The command line adds a table's flags with cli::add_options (cli/common.h); Python reads one with
// OptionTable::read. A value out of its range gets the same words from both: "must be an integer >= 1".
//
// The same rows write and read the struct's JSON record (OptionTable::write and read: gates.json's
// "options", a run config's "train") and check a struct built in code (OptionTable::check), so a field's
// name and range are not restated in a to_json, a from_json and a validate. A row may carry the names
// earlier files used for it (.was("beta")): read, never written. A recorded row (.recorded(), or
// custom()) is in the JSON record only, neither a flag nor a Python keyword (GateOptions' stretch).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "headprune/util/json_fields.h"

namespace hp {

// The numbers an option admits: [lo, hi], an end open where said; an infinite end is no bound. Every
// admitted number is finite.
struct ValueRange {
  static constexpr double kNone = std::numeric_limits<double>::infinity();
  double lo = -kNone, hi = kNone;
  bool lo_open = false, hi_open = false;

  static ValueRange any() { return {}; }
  static ValueRange at_least(double lo) { return {lo, kNone, false, false}; }
  static ValueRange positive() { return {0, kNone, true, false}; }
  static ValueRange between(double lo, double hi, bool lo_open = false, bool hi_open = false) {
    return {lo, hi, lo_open, hi_open};
  }
  bool contains(double v) const;
  // ">= 1", "in (0, 1]", "> 0"; "" for any finite number.
  std::string text() const;
  // What a value must be: "an integer >= 1", "a number in [0, 1]", "a finite number".
  std::string requirement(bool integer) const;
};

// The whole text as a finite number ("0.5", "1e-3"); nullopt for anything else ("", "1x", "nan", "inf").
// One parser for option values that are numbers inside a text (the plan's min_ratio, a budget's value,
// the concentrator's weight, the command line's number checks).
std::optional<double> parse_finite_number(const std::string& text);

// How a yes/no option is spelt on the command line: `--flag true|false`, a bare `--flag` that sets it,
// or a bare flag that clears it ("!--no-gemm-probe"). In Python it is always `key=True|False`.
enum class FlagStyle { Value, Sets, Clears };

template <class S>
struct OptionField {
  using IntRef = std::function<int64_t&(S&)>;
  using RealRef = std::function<double&(S&)>;
  using BoolRef = std::function<bool&(S&)>;
  using TextRef = std::function<std::string&(S&)>;
  using IntsRef = std::function<std::vector<int64_t>&(S&)>;
  // A value the library parses from its name (an enum, "adaptive" or a weight); `shown` is the
  // default --help shows.
  // `get` writes the value into the JSON record (empty: not written).
  struct Parsed {
    std::function<void(S&, const std::string&)> set;
    std::string shown;
    std::function<nlohmann::json(const S&)> get = nullptr;
  };
  // The same for a list of names: a repeatable flag on the command line, a list of strings in Python;
  // the values given replace the default.
  struct ParsedList {
    std::function<void(S&, const std::vector<std::string>&)> set;
    std::string shown;
    std::function<nlohmann::json(const S&)> get = nullptr;
  };
  // A recorded value kept in JSON as it is (a pair, an optional count, an unsigned seed): `get` writes
  // it (empty: a row only read, for an old file's shape), `set` reads it and throws
  // std::invalid_argument with its words for a bad value.
  struct Custom {
    std::function<nlohmann::json(const S&)> get;
    std::function<void(S&, const nlohmann::json&)> set;
  };
  std::string key;   // Python keyword and JSON key ("min_seconds")
  std::string flag;  // CLI11's spelling ("--min-time", "--coef,--lambda"); "" = not on the command line
  std::string help;
  std::variant<IntRef, RealRef, BoolRef, TextRef, IntsRef, Parsed, ParsedList, Custom> at;
  ValueRange range;  // numbers; for a list, each of its numbers
  bool show_default = true;
  FlagStyle style = FlagStyle::Value;
  std::vector<std::string> old_keys;  // what earlier JSON records called it: read, never written
  bool option = true;  // false: in the JSON record only (no flag, no Python keyword; not in keys())
};

template <class S>
class OptionTable {
 public:
  using Field = OptionField<S>;

  // M: a pointer to a member of S, or a callable S& -> T& (a member of a member).
  template <class M>
  OptionTable&& integer(std::string key, std::string flag, std::string help, M m, ValueRange r = {}, bool shown = true) && {
    return add(std::move(key), std::move(flag), std::move(help), typename Field::IntRef(ref<int64_t>(m)), r, shown);
  }
  template <class M>
  OptionTable&& real(std::string key, std::string flag, std::string help, M m, ValueRange r = {}, bool shown = true) && {
    return add(std::move(key), std::move(flag), std::move(help), typename Field::RealRef(ref<double>(m)), r, shown);
  }
  template <class M>
  OptionTable&& yes_no(std::string key, std::string flag, std::string help, M m, FlagStyle style) && {
    add(std::move(key), std::move(flag), std::move(help), typename Field::BoolRef(ref<bool>(m)), {}, style == FlagStyle::Value);
    fields_.back().style = style;
    return std::move(*this);
  }
  template <class M>
  OptionTable&& text(std::string key, std::string flag, std::string help, M m, bool shown = true) && {
    return add(std::move(key), std::move(flag), std::move(help), typename Field::TextRef(ref<std::string>(m)), {}, shown);
  }
  template <class M>
  OptionTable&& integers(std::string key, std::string flag, std::string help, M m, ValueRange r = {}) && {
    return add(std::move(key), std::move(flag), std::move(help), typename Field::IntsRef(ref<std::vector<int64_t>>(m)), r, true);
  }
  // `get`: the value as the JSON record writes it (empty: not written).
  OptionTable&& parsed(std::string key, std::string flag, std::string help, std::function<void(S&, const std::string&)> set,
                       std::string shown, std::function<nlohmann::json(const S&)> get = nullptr) && {
    return add(std::move(key), std::move(flag), std::move(help),
               typename Field::Parsed{std::move(set), std::move(shown), std::move(get)}, {}, false);
  }

  OptionTable&& parsed_list(std::string key, std::string flag, std::string help,
                            std::function<void(S&, const std::vector<std::string>&)> set, std::string shown,
                            std::function<nlohmann::json(const S&)> get = nullptr) && {
    return add(std::move(key), std::move(flag), std::move(help),
               typename Field::ParsedList{std::move(set), std::move(shown), std::move(get)}, {}, false);
  }
  // A recorded row of the JSON record only (see Custom).
  OptionTable&& custom(std::string key, std::string help, std::function<nlohmann::json(const S&)> get,
                       std::function<void(S&, const nlohmann::json&)> set) && {
    add(std::move(key), "", std::move(help), typename Field::Custom{std::move(get), std::move(set)}, {}, false);
    fields_.back().option = false;
    return std::move(*this);
  }
  // The last row is in the JSON record only (its flag must be "").
  OptionTable&& recorded() && {
    fields_.back().option = false;
    return std::move(*this);
  }
  // The last row was called `old_key` in earlier JSON records.
  OptionTable&& was(std::string old_key) && {
    fields_.back().old_keys.push_back(std::move(old_key));
    return std::move(*this);
  }

  const std::vector<Field>& fields() const { return fields_; }
  // The options' keys (Python's keywords): recorded rows and old names aside.
  std::set<std::string> keys() const {
    std::set<std::string> k;
    for (const auto& f : fields_)
      if (f.option) k.insert(f.key);
    return k;
  }
  // Every key a JSON record may hold: each row's, old names included.
  std::set<std::string> record_keys() const {
    std::set<std::string> k;
    for (const auto& f : fields_) {
      k.insert(f.key);
      k.insert(f.old_keys.begin(), f.old_keys.end());
    }
    return k;
  }

  // Every field of the table that `f` holds, under its key or an old name, into s; a value of the wrong
  // type or out of its range is f.fail naming the key it was found under. Keys outside the table are the
  // caller's (JsonFields::only with keys() or record_keys()).
  void read(const JsonFields& f, S& s) const {
    for (const auto& field : fields_) {
      if (f.has(field.key)) {
        read_one(f, field, field.key, s);
        continue;
      }
      for (const auto& old : field.old_keys)
        if (f.has(old)) read_one(f, field, old, s);
    }
  }

  // The JSON record of s: every row that writes, under its key.
  nlohmann::json write(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    S& m = const_cast<S&>(s);  // the rows' references are to a mutable S; nothing is changed here
    for (const auto& field : fields_) {
      const std::string& k = field.key;
      if (auto* i = std::get_if<typename Field::IntRef>(&field.at)) j[k] = (*i)(m);
      else if (auto* r = std::get_if<typename Field::RealRef>(&field.at)) j[k] = (*r)(m);
      else if (auto* b = std::get_if<typename Field::BoolRef>(&field.at)) j[k] = (*b)(m);
      else if (auto* t = std::get_if<typename Field::TextRef>(&field.at)) j[k] = (*t)(m);
      else if (auto* l = std::get_if<typename Field::IntsRef>(&field.at)) j[k] = (*l)(m);
      else if (auto* g = getter(field)) j[k] = (*g)(s);
    }
    return j;
  }

  // Every number of s within its row's range; else std::invalid_argument "<who>: <key> must be <the
  // range's words>, not <value>" (the words OptionTable::read and the command line use).
  void check(const S& s, const std::string& who) const {
    S& m = const_cast<S&>(s);
    auto bad = [&](const Field& field, bool integer, const std::string& shown) {
      throw std::invalid_argument(who + ": " + field.key + " must be " + field.range.requirement(integer) + ", not " + shown);
    };
    for (const auto& field : fields_) {
      if (auto* i = std::get_if<typename Field::IntRef>(&field.at)) {
        const int64_t v = (*i)(m);
        if (!field.range.contains(static_cast<double>(v))) bad(field, true, std::to_string(v));
      } else if (auto* r = std::get_if<typename Field::RealRef>(&field.at)) {
        const double v = (*r)(m);
        if (!field.range.contains(v)) bad(field, false, nlohmann::json(v).dump());
      } else if (auto* l = std::get_if<typename Field::IntsRef>(&field.at)) {
        for (int64_t v : (*l)(m))
          if (!field.range.contains(static_cast<double>(v))) bad(field, true, std::to_string(v));
      }
    }
  }

 private:
  template <class T, class M>
  static std::function<T&(S&)> ref(M m) {
    return [m](S& s) -> T& { return std::invoke(m, s); };
  }
  template <class Ref>
  OptionTable&& add(std::string key, std::string flag, std::string help, Ref r, ValueRange range, bool shown) {
    Field f;
    f.key = std::move(key);
    f.flag = std::move(flag);
    f.help = std::move(help);
    f.at = std::move(r);
    f.range = range;
    f.show_default = shown;
    fields_.push_back(std::move(f));
    return std::move(*this);
  }
  static void check(const JsonFields& f, const Field& field, const std::string& k, double v, bool integer,
                    const std::string& shown) {
    if (!field.range.contains(v)) f.fail(k, "must be " + field.range.requirement(integer) + ", not " + shown);
  }
  static const std::function<nlohmann::json(const S&)>* getter(const Field& field) {
    const std::function<nlohmann::json(const S&)>* g = nullptr;
    if (auto* p = std::get_if<typename Field::Parsed>(&field.at)) g = &p->get;
    else if (auto* pl = std::get_if<typename Field::ParsedList>(&field.at)) g = &pl->get;
    else if (auto* c = std::get_if<typename Field::Custom>(&field.at)) g = &c->get;
    return g && *g ? g : nullptr;
  }
  // Reads the row's value from f's `k` (its key, or an old name).
  static void read_one(const JsonFields& f, const Field& field, const std::string& k, S& s) {
    if (auto* i = std::get_if<typename Field::IntRef>(&field.at)) {
      const int64_t v = f.req_int(k);
      check(f, field, k, static_cast<double>(v), true, std::to_string(v));
      (*i)(s) = v;
    } else if (auto* r = std::get_if<typename Field::RealRef>(&field.at)) {
      const double v = f.req_num(k);
      check(f, field, k, v, false, f.at(k).dump());
      (*r)(s) = v;
    } else if (auto* b = std::get_if<typename Field::BoolRef>(&field.at)) {
      (*b)(s) = f.opt_bool(k, false);
    } else if (auto* t = std::get_if<typename Field::TextRef>(&field.at)) {
      (*t)(s) = f.req_str(k);
    } else if (auto* l = std::get_if<typename Field::IntsRef>(&field.at)) {
      const nlohmann::json& v = f.at(k);
      if (!v.is_array()) f.fail(k, "must be a list of integers, got " + v.dump());
      std::vector<int64_t> out;
      for (const auto& x : v) {
        out.push_back(f.as_int(x, k));
        if (!field.range.contains(static_cast<double>(out.back())))
          f.fail(k, "must hold integers " + field.range.text() + ", not " + x.dump());
      }
      (*l)(s) = std::move(out);
    } else if (auto* pl = std::get_if<typename Field::ParsedList>(&field.at)) {
      const std::vector<std::string> names = f.req_strings(k);
      parse_or_fail(f, k, [&] { pl->set(s, names); });
    } else if (auto* c = std::get_if<typename Field::Custom>(&field.at)) {
      parse_or_fail(f, k, [&] { c->set(s, f.at(k)); });
    } else {
      const auto& p = std::get<typename Field::Parsed>(field.at);
      const nlohmann::json& v = f.at(k);
      parse_or_fail(f, k, [&] { p.set(s, v.is_string() ? v.get<std::string>() : v.dump()); });
    }
  }
  // Runs a row's own parser; its std::invalid_argument becomes f.fail with the parser's words after the
  // field's name.
  template <class Parse>
  static void parse_or_fail(const JsonFields& f, const std::string& k, Parse&& parse) {
    try {
      parse();
    } catch (const std::invalid_argument& e) {
      f.fail(k, std::string("is not valid: ") + e.what());
    }
  }

  std::vector<Field> fields_;
};

}  // namespace hp
