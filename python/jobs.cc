// The job functions of the Python module: keyword arguments (JSON) -> the job's request struct (the
// fields the CLI fills from its options, read with the library's own parsers) -> one library call
// (jobs/*.h) -> its result as JSON text (what the CLI writes or prints) and, for importance, tensors.
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bridge.h"
#include "headprune/jobs/eval_job.h"
#include "headprune/jobs/export_job.h"
#include "headprune/jobs/gates_job.h"
#include "headprune/jobs/importance_job.h"
#include "headprune/jobs/prune_job.h"
#include "headprune/jobs/train_job.h"
#include "headprune/prune/strategy.h"
#include "headprune/util/names.h"

namespace hp::python {

namespace {

// ---- arguments ----------------------------------------------------------------------------------

std::vector<int64_t> ints(const JsonFields& f, const std::string& key, int64_t lo) {
  const nlohmann::json& v = f.at(key);
  if (!v.is_array()) f.fail(key, "must be a list of integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const auto& x : v) {
    out.push_back(f.as_int(x, key));
    if (out.back() < lo) f.fail(key, "must hold integers >= " + std::to_string(lo) + ", not " + x.dump());
  }
  return out;
}

// The data section: DataSource's fields by name (jobs/job.h).
DataSource data_source(const JsonFields& f) {
  DataSource d;
  if (!f.has("data")) return d;
  const JsonFields g = f.object("data");
  g.only(data_source_table().keys(), "data field");
  data_source_table().read(g, d);
  return d;
}

FinetuneOptions finetune_options(const JsonFields& f) {
  FinetuneOptions o;
  if (!f.has("finetune")) return o;
  const JsonFields g = f.object("finetune");
  g.only(finetune_option_table().keys(), "finetune field");
  finetune_option_table().read(g, o);
  return o;
}

// ---- importance ---------------------------------------------------------------------------------

ImportanceRequest importance_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "importance");
  std::set<std::string> keys = importance_request_table().keys();
  keys.insert({"checkpoint", "out_dir", "overwrite", "data"});
  f.only(keys);
  ImportanceRequest r;
  r.checkpoint = f.opt_str("checkpoint", "");
  r.out_dir = f.opt_str("out_dir", "");
  r.overwrite = f.opt_bool("overwrite", false);
  importance_request_table().read(f, r);
  r.data = data_source(f);
  return r;
}

// One map as tensors: {type: [layers, units] float64}, the unit's original ids as columns (query
// heads, or key/value heads for kv_group maps), NaN where the map has no score (a removed head).
py::dict map_tensors(const HeadScores& s, const ModelConfig& cfg) {
  py::dict out;
  const int64_t width = s.unit == ScoreUnit::KvGroup ? cfg.effective_kv_heads() : cfg.n_heads;
  for (AttnType t : cfg.attn_types()) {
    const int64_t layers = cfg.n_layers(t);
    torch::Tensor x = torch::full({layers, width}, std::numeric_limits<double>::quiet_NaN(), torch::kFloat64);
    auto a = x.accessor<double, 2>();
    for (const auto& [h, v] : s.scores)
      if (h.type == t && h.layer >= 0 && h.layer < layers && h.head >= 0 && h.head < width) a[h.layer][h.head] = v;
    out[py::str(to_string(t))] = x;
  }
  return out;
}

py::tuple importance_result(const nlohmann::json& json, const std::vector<HeadScores>& maps, const ModelConfig& cfg) {
  py::list tensors;
  for (const auto& s : maps) tensors.append(map_tensors(s, cfg));
  return py::make_tuple(dump_json(json), tensors);
}

// Token ids given from Python: [{"src": [...], "tgt": [...], "segments": [...], "label": n}, ...] as
// the library's examples (data/dataset.h), one evaluation set.
EvalSet examples_set(const std::string& examples_json, const std::optional<Tokenizer>& tokenizer) {
  const nlohmann::json j = parse_json(examples_json, "examples");
  if (!j.is_array() || j.empty()) throw std::invalid_argument("headprune.importance: data holds no examples");
  EvalSet set;
  set.name = "token ids from Python (" + std::to_string(j.size()) + " examples)";
  set.tokenizer = tokenizer;
  for (const auto& e : j) {
    const JsonFields f = arguments(e, "importance: data example");
    f.only({"src", "tgt", "segments", "label"}, "example field");
    Example x;
    x.src = ints(f, "src", 0);
    if (f.has("tgt")) x.tgt = ints(f, "tgt", 0);
    if (f.has("segments")) x.segments = ints(f, "segments", 0);
    x.label = f.opt_int("label", -1);
    set.examples.push_back(std::move(x));
  }
  return set;
}

py::tuple importance_job(const std::string& request, const std::string& runtime, py::object progress, py::object note) {
  const ImportanceRequest r = importance_request(parse_json(request, "request"));
  if (r.checkpoint.empty()) throw std::invalid_argument("headprune.importance: a model or a checkpoint is required");
  const Runtime rt = start_runtime(runtime);
  Events ev(std::move(progress), std::move(note));
  const ImportanceResult res = ev.run([&](const JobEvents& e) { return run_importance(r, rt, e); });
  return importance_result(res.json, res.maps, res.config);
}

py::tuple importance_examples(Model& m, const std::string& examples, const std::string& request,
                              const std::string& runtime, py::object progress, py::object note) {
  ImportanceRequest r = importance_request(parse_json(request, "request"));
  r.checkpoint = m.loaded.dir;  // what each map's info names
  if (!r.out_dir.empty() || r.cost || r.pipeline)
    throw std::invalid_argument("headprune.importance: out, cost and pipeline need data from a file (a run config, "
                                "texts or the synthetic task), not token ids");
  const Runtime rt = start_runtime(runtime);
  const EvalSet set = examples_set(examples, m.loaded.tokenizer);
  Events ev(std::move(progress), std::move(note));
  const auto maps = ev.run([&](const JobEvents& e) { return score_importance(m.loaded, set, r, rt, e); });
  nlohmann::json json = maps_to_json(maps);
  json["checkpoint"] = m.loaded.dir;
  json["data"] = set.name;
  json["config"] = m.config().to_json();
  return importance_result(json, maps, m.config());
}

// ---- plans and pruning --------------------------------------------------------------------------

void budget_shape(const JsonFields& g, BudgetShape& b) {
  g.only(budget_shape_table().keys(), "budget_shape field");
  budget_shape_table().read(g, b);
}

// PlanSpec (prune/strategy.h) by field name; the strategy, when not named, follows from what is given
// (settle_plan_strategy, as for the CLI's prune).
PlanSpec plan_spec(const JsonFields& f) {
  std::set<std::string> keys = plan_option_table().keys();
  keys.insert({"strategy", "given", "budget_shape"});
  f.only(keys, "plan field");
  PlanSpec p;
  plan_option_table().read(f, p);
  if (f.has("given")) p.given = PruningPlan::from_json(f.at("given"), "headprune: the plan given");
  if (f.has("budget_shape")) budget_shape(f.object("budget_shape"), p.budget_shape);
  settle_plan_strategy(p, f.has("strategy") ? std::optional<PlanStrategy>(parse_plan_strategy(f.req_str("strategy")))
                                            : std::nullopt,
                       f.has("given"));
  return p;
}

PlanRequest plan_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "plan");
  std::set<std::string> keys = plan_request_table().keys();
  keys.insert({"checkpoint", "plan", "data"});
  f.only(keys);
  PlanRequest r;
  r.checkpoint = f.req_str("checkpoint");
  plan_request_table().read(f, r);
  if (f.has("plan")) r.plan = plan_spec(f.object("plan"));
  r.data = data_source(f);
  return r;
}

// The arguments prune and gates share (a checkpoint in, a model written, evaluated and fine-tuned), after
// checking that f holds only those, `table`'s keys and `own`; then `table`'s fields.
template <class Request>
void recovery_job_fields(const JsonFields& f, const OptionTable<Request>& table, std::set<std::string> own, Request& r) {
  const auto keys = table.keys();
  own.insert(keys.begin(), keys.end());
  own.insert({"checkpoint", "out_dir", "overwrite", "data", "finetune"});
  f.only(own);
  r.checkpoint = f.req_str("checkpoint");
  r.out_dir = f.req_str("out_dir");
  r.overwrite = f.opt_bool("overwrite", false);
  table.read(f, r);
  r.data = data_source(f);
  r.finetune = finetune_options(f);
}

PruneRequest prune_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "prune");
  PruneRequest r;
  recovery_job_fields(f, prune_request_table(), {"plan"}, r);
  if (f.has("plan")) r.plan = plan_spec(f.object("plan"));
  return r;
}

// ---- gates --------------------------------------------------------------------------------------

void gate_options(const JsonFields& g, GateOptions& o) {
  g.only(gate_option_table().keys(), "gate field");
  gate_option_table().read(g, o);
}

GatesRequest gates_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "gates");
  GatesRequest r;
  recovery_job_fields(f, gates_request_table(), {"gate"}, r);
  if (f.has("gate")) gate_options(f.object("gate"), r.gate);
  return r;
}

// ---- bench, export, init, train -----------------------------------------------------------------

BenchRequest bench_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "bench");
  std::set<std::string> keys = bench_option_table().keys();
  keys.insert({"checkpoints", "precisions", "textbook", "json_path"});
  f.only(keys);
  BenchRequest r;
  r.checkpoints = f.req_strings("checkpoints");
  if (r.checkpoints.empty()) f.fail("checkpoints", "must name at least one model");
  if (f.has("precisions")) {
    r.precisions.clear();
    for (const auto& s : f.req_strings("precisions")) r.precisions.push_back(parse_precision(s));
  }
  r.textbook = f.opt_bool("textbook", false);
  r.json_path = f.opt_str("json_path", "");
  bench_option_table().read(f, r.bench);
  return r;
}

ExportRequest export_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "export");
  std::set<std::string> keys = export_request_table().keys();
  keys.insert({"checkpoint", "overwrite"});
  f.only(keys);
  ExportRequest r;
  r.checkpoint = f.req_str("checkpoint");
  r.overwrite = f.opt_bool("overwrite", false);
  export_request_table().read(f, r);
  return r;
}

TrainRequest train_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "train");
  std::set<std::string> keys = train_request_table().keys();
  keys.insert({"out_dir", "overwrite"});
  f.only(keys);
  TrainRequest r;
  r.out_dir = f.req_str("out_dir");
  r.overwrite = f.opt_bool("overwrite", false);
  train_request_table().read(f, r);
  return r;
}

InitRequest init_request(const nlohmann::json& j) {
  const JsonFields f = arguments(j, "init");
  f.only({"config", "out_dir", "overwrite"});
  InitRequest r;
  r.config = f.req_str("config");
  r.out_dir = f.req_str("out_dir");
  r.overwrite = f.opt_bool("overwrite", false);
  return r;
}

// A job that prints: (its JSON as text, what the CLI prints).
template <typename Result>
py::tuple json_and_text(const Result& res) {
  std::ostringstream text;
  res.print(text);
  return py::make_tuple(dump_json(res.to_json()), text.str());
}

void bind_scoring(py::module_& m) {
  m.def("run_importance", &importance_job, py::arg("request"), py::arg("runtime"), py::arg("progress"), py::arg("note"));
  m.def("importance_examples", &importance_examples, py::arg("model"), py::arg("examples"), py::arg("request"),
        py::arg("runtime"), py::arg("progress"), py::arg("note"));
  m.def(
      "make_plan",
      [](const std::string& request, const std::string& runtime, py::object progress, py::object note) {
        const PlanRequest r = plan_request(parse_json(request, "request"));
        const Runtime rt = start_runtime(runtime);
        Events ev(std::move(progress), std::move(note));
        const PruningPlan plan = ev.run([&](const JobEvents& e) { return run_plan(r, rt, e); });
        return dump_json(plan.to_json());
      },
      py::arg("request"), py::arg("runtime"), py::arg("progress"), py::arg("note"));
}

// A job of the form run_X(request, runtime, events) -> Result with to_json() and print().
template <typename Request, typename Result>
void bind_printing(py::module_& m, const char* name, Request (*read)(const nlohmann::json&),
                   Result (*job)(const Request&, const Runtime&, const JobEvents&)) {
  m.def(
      name,
      [read, job](const std::string& request, const std::string& runtime, py::object progress, py::object note) {
        const Request r = read(parse_json(request, "request"));
        const Runtime rt = start_runtime(runtime);
        Events ev(std::move(progress), std::move(note));
        const Result res = ev.run([&](const JobEvents& e) { return job(r, rt, e); });
        return json_and_text(res);
      },
      py::arg("request"), py::arg("runtime"), py::arg("progress"), py::arg("note"));
}

void bind_checkpoints(py::module_& m) {
  m.def(
      "run_export",
      [](const std::string& request) {
        const ExportRequest r = export_request(parse_json(request, "request"));
        py::gil_scoped_release release;
        return run_export(r);
      },
      py::arg("request"));
  m.def(
      "run_init",
      [](const std::string& request, const std::string& runtime) {
        const InitRequest r = init_request(parse_json(request, "request"));
        const Runtime rt = start_runtime(runtime);
        py::gil_scoped_release release;
        return run_init(r, rt);
      },
      py::arg("request"), py::arg("runtime"));
  m.def(
      "run_train",
      [](const std::string& request, const std::string& runtime, py::object progress, py::object note) {
        const TrainRequest r = train_request(parse_json(request, "request"));
        const Runtime rt = start_runtime(runtime);
        Events ev(std::move(progress), std::move(note));
        const TrainReport res = ev.run([&](const JobEvents& e) { return run_train(r, rt, e); });
        return dump_json(res.to_json());
      },
      py::arg("request"), py::arg("runtime"), py::arg("progress"), py::arg("note"));
  m.def(
      "info",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return dump_json(info_json(path));
      },
      py::arg("path"));
}

// The keywords of a request part read from an option table (util/options.h), for the Python layer's
// own checks (headprune/__init__.py's data fields) and tests/python/test_signatures.py, which holds
// every job's keywords against these.
std::vector<std::string> option_keys(const std::string& part) {
  static const std::map<std::string, std::set<std::string>> tables = {
      {"data", data_source_table().keys()},        {"finetune", finetune_option_table().keys()},
      {"gate", gate_option_table().keys()},        {"bench", bench_option_table().keys()},
      {"budget_shape", budget_shape_table().keys()}, {"importance", importance_request_table().keys()},
      {"plan", plan_option_table().keys()},        {"plan_request", plan_request_table().keys()},
      {"prune", prune_request_table().keys()},     {"gates", gates_request_table().keys()},
      {"export", export_request_table().keys()},   {"train", train_request_table().keys()}};
  const auto it = tables.find(part);
  if (it == tables.end()) {
    std::string known;
    for (const auto& [name, keys] : tables) known += (known.empty() ? "" : ", ") + name;
    throw std::invalid_argument("option_keys: no option table '" + part + "' (" + known + ")");
  }
  return {it->second.begin(), it->second.end()};
}

}  // namespace

void register_jobs(py::module_& m) {
  m.def("option_keys", &option_keys, py::arg("part"));
  bind_scoring(m);
  bind_printing<PruneRequest, PruneResult>(m, "run_prune", &prune_request, &run_prune);
  bind_printing<GatesRequest, GatesResult>(m, "run_gates", &gates_request, &run_gates);
  bind_printing<BenchRequest, BenchReport>(m, "run_bench", &bench_request, &run_bench);
  bind_checkpoints(m);
}

}  // namespace hp::python
