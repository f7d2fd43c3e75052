#include "compiler/cost/machine_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace weft::cost {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error(where_ + ": `" + field + "`: " + what);
  }

  const json& Field(const json& obj, const std::string& path, const char* key, bool required) const {
    static const json kNull;
    if (!obj.contains(key)) {
      if (required) Fail(path + key, "missing");
      return kNull;
    }
    return obj[key];
  }

  std::string String(const json& obj, const std::string& path, const char* key, bool required = true) const {
    const json& v = Field(obj, path, key, required);
    if (v.is_null() && !required) return "";
    if (!v.is_string()) Fail(path + key, "expected a string");
    return v.get<std::string>();
  }

  double Number(const json& obj, const std::string& path, const char* key, bool positive, bool required = true,
                double fallback = 0) const {
    const json& v = Field(obj, path, key, required);
    if (v.is_null() && !required) return fallback;
    if (!v.is_number()) Fail(path + key, "expected a number");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || (positive && d == 0)) {
      Fail(path + key, positive ? "expected a finite number > 0" : "expected a finite number >= 0");
    }
    return d;
  }

  int64_t Int(const json& obj, const std::string& path, const char* key, int64_t min, bool required = true,
              int64_t fallback = 0) const {
    const json& v = Field(obj, path, key, required);
    if (v.is_null() && !required) return fallback;
    if (!v.is_number_integer() || v.get<int64_t>() < min) {
      Fail(path + key, "expected an integer >= " + std::to_string(min));
    }
    return v.get<int64_t>();
  }

  std::vector<RatePoint> Rates(const json& obj, const std::string& path, const char* key) const {
    std::vector<RatePoint> out;
    const json& list = Field(obj, path, key, false);
    if (list.is_null()) return out;
    if (!list.is_array()) Fail(path + key, "expected a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = path + key + "[" + std::to_string(i) + "].";
      const json& e = list[i];
      if (!e.is_object()) Fail(at.substr(0, at.size() - 1), "expected an object");
      RatePoint p;
      p.dtype = String(e, at, "dtype");
      p.threads = static_cast<int>(Int(e, at, "threads", 1));
      p.size = Number(e, at, "size", /*positive=*/true);
      p.rate = Number(e, at, "rate", /*positive=*/true);
      out.push_back(p);
    }
    return out;
  }

 private:
  std::string where_;
};

json RatesJson(const std::vector<RatePoint>& points) {
  json list = json::array();
  for (const RatePoint& p : points) {
    list.push_back({{"dtype", p.dtype}, {"threads", p.threads}, {"size", p.size}, {"rate", p.rate}});
  }
  return list;
}

// Linear interpolation of (x, y) points sorted by x, clamped at the ends.
double Interpolate(const std::vector<std::pair<double, double>>& xy, double x) {
  if (xy.empty()) return 0;
  if (x <= xy.front().first) return xy.front().second;
  if (x >= xy.back().first) return xy.back().second;
  for (size_t i = 1; i < xy.size(); ++i) {
    if (x <= xy[i].first) {
      const double t = (x - xy[i - 1].first) / (xy[i].first - xy[i - 1].first);
      return xy[i - 1].second + t * (xy[i].second - xy[i - 1].second);
    }
  }
  return xy.back().second;
}

// The rate at `size` among the points of one dtype and thread count (log-linear in size).
double RateOfThreads(const std::vector<const RatePoint*>& points, double size) {
  std::vector<std::pair<double, double>> xy;
  for (const RatePoint* p : points) xy.emplace_back(std::log(p->size), p->rate);
  std::sort(xy.begin(), xy.end());
  return Interpolate(xy, std::log(std::max(size, 1.0)));
}

}  // namespace

double RateAt(const MachineProfile& m, const std::vector<RatePoint>& points, const std::string& dtype, double size,
              int threads, int ranks_per_host) {
  std::string want = dtype;
  if (std::none_of(points.begin(), points.end(), [&](const RatePoint& p) { return p.dtype == want; })) want = "f32";
  std::vector<int> counts;
  for (const RatePoint& p : points) {
    if (p.dtype == want && std::find(counts.begin(), counts.end(), p.threads) == counts.end()) counts.push_back(p.threads);
  }
  if (counts.empty()) return 0;
  std::sort(counts.begin(), counts.end());
  std::vector<std::pair<double, double>> by_threads;
  for (int t : counts) {
    std::vector<const RatePoint*> of;
    for (const RatePoint& p : points) {
      if (p.dtype == want && p.threads == t) of.push_back(&p);
    }
    by_threads.emplace_back(t, RateOfThreads(of, size));
  }
  threads = std::max(1, threads);
  double rate = Interpolate(by_threads, threads);
  if (m.kind == "cpu") {
    const double demand = static_cast<double>(std::max(1, ranks_per_host)) * threads;
    rate *= std::min(1.0, static_cast<double>(std::max(1, m.cores)) / demand);
  }
  return rate;
}

std::optional<CollectiveTime> CollectiveAt(const MachineProfile& m, const std::string& transport, const std::string& op,
                                           int ranks) {
  const CollectiveFit* best = nullptr;
  for (const CollectiveFit& c : m.collectives) {
    if (c.transport != transport || c.op != op) continue;
    if (best == nullptr || std::abs(c.ranks - ranks) < std::abs(best->ranks - ranks)) best = &c;
  }
  if (best == nullptr) return std::nullopt;
  CollectiveTime t{best->alpha_s, best->beta_bytes_per_s, best->ranks == ranks};
  return t;
}

MachineProfile ParseMachineProfile(const std::string& json_text, const std::string& where) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  Reader r(where);
  if (doc.is_discarded()) throw std::runtime_error(where + ": not JSON");
  if (!doc.is_object()) throw std::runtime_error(where + ": expected a JSON object");
  MachineProfile m;
  m.format = r.String(doc, "", "format");
  if (m.format != kMachineFormat) {
    const bool newer = m.format.rfind("weft.machine/", 0) == 0;
    r.Fail("format", "`" + m.format + "` is not " + kMachineFormat +
                         (newer ? " (a profile of another weft version: run `weft-run --calibrate -o FILE` again)"
                                : " (not a weft machine profile)"));
  }
  m.kind = r.String(doc, "", "kind");
  if (m.kind != "cpu" && m.kind != "cuda") r.Fail("kind", "`" + m.kind + "`: expected cpu or cuda");
  m.device = r.String(doc, "", "device");
  m.host = r.String(doc, "", "host", false);
  if (!doc.contains("measured") || !doc["measured"].is_boolean()) r.Fail("measured", "expected true or false");
  m.measured = doc["measured"].get<bool>();
  m.source = r.String(doc, "", "source", false);
  if (doc.contains("citations")) {
    if (!doc["citations"].is_array()) r.Fail("citations", "expected a list of strings");
    for (const json& c : doc["citations"]) {
      if (!c.is_string()) r.Fail("citations", "expected a list of strings");
      m.citations.push_back(c.get<std::string>());
    }
  }
  m.cores = static_cast<int>(r.Int(doc, "", "cores", 1));
  m.memory_bytes = r.Int(doc, "", "memory_bytes", 0, false, 0);
  m.rank_base_bytes = r.Int(doc, "", "rank_base_bytes", 0, false, 0);
  if (doc.contains("group_bytes")) {
    if (!doc["group_bytes"].is_array()) r.Fail("group_bytes", "expected a list of integers");
    for (const json& v : doc["group_bytes"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) r.Fail("group_bytes", "expected a list of integers >= 0");
      m.group_bytes.push_back(v.get<int64_t>());
    }
  }
  const json& compute = r.Field(doc, "", "compute", true);
  if (!compute.is_object()) r.Fail("compute", "expected an object");
  m.matmul = r.Rates(compute, "compute.", "matmul");
  m.attention = r.Rates(compute, "compute.", "attention");
  m.elementwise = r.Rates(compute, "compute.", "elementwise");
  if (m.matmul.empty()) r.Fail("compute.matmul", "needs at least one rate");
  if (m.elementwise.empty()) r.Fail("compute.elementwise", "needs at least one rate");
  m.op_overhead_s = r.Number(compute, "compute.", "op_overhead_s", false, false, 0);
  const json& colls = r.Field(doc, "", "collectives", false);
  if (!colls.is_null()) {
    if (!colls.is_array()) r.Fail("collectives", "expected a list");
    for (size_t i = 0; i < colls.size(); ++i) {
      const std::string at = "collectives[" + std::to_string(i) + "].";
      const json& e = colls[i];
      if (!e.is_object()) r.Fail(at.substr(0, at.size() - 1), "expected an object");
      CollectiveFit c;
      c.transport = r.String(e, at, "transport");
      c.op = r.String(e, at, "op");
      if (c.op != "all_to_all" && c.op != "all_gather" && c.op != "all_reduce" && c.op != "send_recv") {
        r.Fail(at + "op", "`" + c.op + "`: expected all_to_all, all_gather, all_reduce or send_recv");
      }
      c.ranks = static_cast<int>(r.Int(e, at, "ranks", 2));
      c.alpha_s = r.Number(e, at, "alpha_s", false);
      c.beta_bytes_per_s = r.Number(e, at, "beta_bytes_per_s", true);
      m.collectives.push_back(c);
    }
  }
  if (doc.contains("fitted") && !doc["fitted"].is_null()) {
    const json& f = doc["fitted"];
    if (!f.is_object()) r.Fail("fitted", "expected an object");
    Fitted fit;
    fit.node_overhead_s = r.Number(f, "fitted.", "node_overhead_s", false, false, 0);
    fit.compute_scale = r.Number(f, "fitted.", "compute_scale", true, false, 1);
    fit.shared_compute_scale = r.Number(f, "fitted.", "shared_compute_scale", true, false, fit.compute_scale);
    fit.collective_wait_s = r.Number(f, "fitted.", "collective_wait_s", false, false, 0);
    fit.p2p_wait_s = r.Number(f, "fitted.", "p2p_wait_s", false, false, fit.collective_wait_s);
    fit.crowded_wait_s = r.Number(f, "fitted.", "crowded_wait_s", false, false, 0);
    fit.param_memory_factor = r.Number(f, "fitted.", "param_memory_factor", true, false, 1);
    fit.activation_memory_factor = r.Number(f, "fitted.", "activation_memory_factor", true, false, 1);
    fit.memory_offset_bytes = r.Number(f, "fitted.", "memory_offset_bytes", false, false, 0);
    if (f.contains("cases")) {
      if (!f["cases"].is_array()) r.Fail("fitted.cases", "expected a list of strings");
      for (const json& c : f["cases"]) {
        if (!c.is_string()) r.Fail("fitted.cases", "expected a list of strings");
        fit.cases.push_back(c.get<std::string>());
      }
    }
    m.fitted = fit;
  }
  return m;
}

MachineProfile ReadMachineProfile(const std::string& file, const std::string& expect_kind,
                                  std::vector<std::string>* warnings) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read machine profile `" + file + "`");
  std::stringstream text;
  text << in.rdbuf();
  MachineProfile m = ParseMachineProfile(text.str(), file);
  if (warnings != nullptr) {
    if (!expect_kind.empty() && m.kind != expect_kind) {
      warnings->push_back(file + ": a profile of a " + m.kind + " machine (" + m.device + "), used for a " +
                          expect_kind + " run: its predictions are for that machine, not this one");
    }
    if (!m.measured) {
      warnings->push_back(file + ": written from published figures (" + (m.source.empty() ? "see the file" : m.source) +
                          "), not measured: its predictions are estimates");
    }
  }
  return m;
}

std::string WriteMachineProfile(const MachineProfile& m) {
  json doc;
  doc["format"] = m.format;
  doc["kind"] = m.kind;
  doc["device"] = m.device;
  if (!m.host.empty()) doc["host"] = m.host;
  doc["measured"] = m.measured;
  if (!m.source.empty()) doc["source"] = m.source;
  if (!m.citations.empty()) doc["citations"] = m.citations;
  doc["cores"] = m.cores;
  if (m.memory_bytes > 0) doc["memory_bytes"] = m.memory_bytes;
  doc["rank_base_bytes"] = m.rank_base_bytes;
  doc["group_bytes"] = m.group_bytes;
  doc["compute"] = {{"matmul", RatesJson(m.matmul)},
                    {"attention", RatesJson(m.attention)},
                    {"elementwise", RatesJson(m.elementwise)},
                    {"op_overhead_s", m.op_overhead_s}};
  json colls = json::array();
  for (const CollectiveFit& c : m.collectives) {
    colls.push_back({{"transport", c.transport},
                     {"op", c.op},
                     {"ranks", c.ranks},
                     {"alpha_s", c.alpha_s},
                     {"beta_bytes_per_s", c.beta_bytes_per_s}});
  }
  doc["collectives"] = colls;
  if (m.fitted) {
    doc["fitted"] = {{"node_overhead_s", m.fitted->node_overhead_s},
                     {"compute_scale", m.fitted->compute_scale},
                     {"shared_compute_scale", m.fitted->shared_compute_scale},
                     {"collective_wait_s", m.fitted->collective_wait_s},
                     {"p2p_wait_s", m.fitted->p2p_wait_s},
                     {"crowded_wait_s", m.fitted->crowded_wait_s},
                     {"param_memory_factor", m.fitted->param_memory_factor},
                     {"activation_memory_factor", m.fitted->activation_memory_factor},
                     {"memory_offset_bytes", m.fitted->memory_offset_bytes},
                     {"cases", m.fitted->cases}};
  }
  return doc.dump(2) + "\n";
}

}  // namespace weft::cost
