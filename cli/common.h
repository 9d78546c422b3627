// Options several subcommands share, and the bridge from a job's events to stderr.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "app.h"
#include "headprune/jobs/job.h"
#include "headprune/util/options.h"

namespace hp::cli {

// Range checks for numeric options, with short messages ("--beam: must be an integer >= 1, not 0");
// CLI11's Range and PositiveNumber print their double bounds in full (300 digits). Bounds are
// inclusive; the help text shows the range (e.g. ">= 1", "in (0, 1]").
CLI::Validator at_least(int64_t lo);                  // an integer >= lo
CLI::Validator int_range(int64_t lo, int64_t hi);     // an integer in [lo, hi]
// A finite number in [lo, hi], or (lo, ...] / [..., hi) where the end is open; an infinite bound
// is no bound.
CLI::Validator real_range(double lo, double hi, bool lo_open = false, bool hi_open = false);
CLI::Validator positive_real();                       // a finite number > 0
CLI::Validator finite_real();                         // any finite number
// The same from an option table's range (util/options.h): an integer or a finite number in it.
CLI::Validator in_range(const ValueRange& r, bool integer);

// A parsed row (a name, or a list of names) as an option whose function calls the row's parser; the
// parser's error after the flag ("--split: split 'x' is not one of ...").
template <class V, class S, class Set>
CLI::Option* add_parsed_row(CLI::App* sub, S& s, const OptionField<S>& f, const Set& set, const std::string& shown) {
  const std::string name = f.flag.substr(0, f.flag.find(','));
  auto* o = sub->add_option_function<V>(
      f.flag,
      [&s, set, name](const V& v) {
        try {
          set(s, v);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(name + ": " + e.what());
        }
      },
      f.help);
  if (!shown.empty()) o->default_str(shown);
  return o;
}

// Every row of an option table (util/options.h) with a flag, bound to its field of `s` (which must
// outlive the parse): the table's help, range check and default. `keys`: only these rows (all when empty).
template <class S>
void add_options(CLI::App* sub, S& s, const OptionTable<S>& table, const std::set<std::string>& keys = {}) {
  using F = OptionField<S>;
  for (const F& f : table.fields()) {
    if (f.flag.empty() || (!keys.empty() && !keys.count(f.key))) continue;
    CLI::Option* o = nullptr;
    if (auto* i = std::get_if<typename F::IntRef>(&f.at)) {
      o = sub->add_option(f.flag, (*i)(s), f.help)->check(in_range(f.range, true));
    } else if (auto* r = std::get_if<typename F::RealRef>(&f.at)) {
      o = sub->add_option(f.flag, (*r)(s), f.help)->check(in_range(f.range, false));
    } else if (auto* l = std::get_if<typename F::IntsRef>(&f.at)) {
      o = sub->add_option(f.flag, (*l)(s), f.help)->check(in_range(f.range, true));
    } else if (auto* t = std::get_if<typename F::TextRef>(&f.at)) {
      o = sub->add_option(f.flag, (*t)(s), f.help);
    } else if (auto* b = std::get_if<typename F::BoolRef>(&f.at)) {
      if (f.style == FlagStyle::Value) o = sub->add_option(f.flag, (*b)(s), f.help);
      else sub->add_flag((f.style == FlagStyle::Clears ? "!" : "") + f.flag, (*b)(s), f.help);
    } else if (auto* p = std::get_if<typename F::Parsed>(&f.at)) {
      o = add_parsed_row<std::string>(sub, s, f, p->set, p->shown);
    } else {
      const auto& pl = std::get<typename F::ParsedList>(f.at);
      o = add_parsed_row<std::vector<std::string>>(sub, s, f, pl.set, pl.shown);
    }
    if (o && f.show_default) o->capture_default_str();
  }
}

// --config/--data, --split, --data-root, --max-examples and --synthetic.
void add_data_options(CLI::App* sub, DataSource& d);
// --finetune-steps, --finetune-lr, --finetune-batch-tokens and --synthetic-train.
// --score-split, for jobs that compute head importance (prune, curve).
void add_score_split_option(CLI::App* sub, DataSource& d);
void add_finetune_options(CLI::App* sub, FinetuneOptions& f, DataSource& d);

// --out DIR and --overwrite (replace a non-empty DIR as a whole; without it such a DIR is refused).
CLI::Option* add_out_option(CLI::App* sub, std::string& dir, bool& overwrite, const std::string& help);

// An option whose text a library parser turns into its value (enum names, targets); a bad value is
// the parser's error. The default shown in --help is `shown`.
template <typename T, typename Parse>
CLI::Option* add_parsed(CLI::App* sub, const std::string& name, T& dst, Parse parse, const std::string& help,
                        const std::string& shown = "") {
  auto* opt = sub->add_option_function<std::string>(name, [&dst, parse](const std::string& s) { dst = parse(s); }, help);
  if (!shown.empty()) opt->default_str(shown);
  return opt;
}
// The same for a repeatable option: the values given replace the default list.
template <typename T, typename Parse>
CLI::Option* add_parsed_list(CLI::App* sub, const std::string& name, std::vector<T>& dst, Parse parse,
                             const std::string& help, const std::string& shown = "") {
  auto* opt = sub->add_option_function<std::vector<std::string>>(
      name,
      [&dst, parse](const std::vector<std::string>& v) {
        dst.clear();
        for (const auto& s : v) dst.push_back(parse(s));
      },
      help);
  if (!shown.empty()) opt->default_str(shown);
  return opt;
}

// Progress bars (one per phase) and "[tag] line" status lines on ctx.err.
JobEvents stderr_events(Context& ctx);

}  // namespace hp::cli
