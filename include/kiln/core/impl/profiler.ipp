// kiln/core/impl/profiler.ipp — definitions of kiln/core/profiler.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/core/profiler.hpp"

namespace kiln::detail {

KILN_DECL int profile_thread_number() {
  static std::atomic<int> next{1};
  thread_local const int n = next.fetch_add(1, std::memory_order_relaxed);
  return n;
}

KILN_DECL void json_escape(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
}

KILN_DECL std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

KILN_DECL profiler::profiler(std::string device) : device_(std::move(device)), epoch_(std::chrono::steady_clock::now()) {
  records_.reserve(1024);
}

KILN_DECL profiler::~profiler() {
  if (trace_path_.empty()) return;
  try {
    write_trace(trace_path_);
  } catch (...) {
  }
}

KILN_DECL profiler::handle profiler::begin(profile_record r) {
  std::lock_guard lock(mutex_);
  r.thread = profile_thread_number();
  bool time_gpu = true;
  if (gpu_every_ > 1) {  // one call in gpu_every_ of each kernel, its first included
    std::uint64_t& calls = sampled_[r.name + '\n' + r.variant];
    time_gpu = calls++ % gpu_every_ == 0;
  }
  records_.push_back(std::move(r));
  return {records_.size() - 1, generation_, time_gpu};
}

KILN_DECL void profiler::set_gpu_sampling(std::uint32_t every) {
  std::lock_guard lock(mutex_);
  gpu_every_ = std::max<std::uint32_t>(every, 1);
}

KILN_DECL std::uint32_t profiler::gpu_sampling() const {
  std::lock_guard lock(mutex_);
  return gpu_every_;
}

KILN_DECL void profiler::end(handle h, double wall_us, int threads) {
  std::lock_guard lock(mutex_);
  if (h.generation != generation_) return;  // cleared meanwhile
  records_[h.index].wall_us = wall_us;
  records_[h.index].threads = threads;
}

KILN_DECL void profiler::count_dispatch(handle h) {
  std::lock_guard lock(mutex_);
  if (h.generation == generation_) ++records_[h.index].dispatches;
}

KILN_DECL void profiler::add_gpu(handle h, double start_us, double dur_us) {
  std::lock_guard lock(mutex_);
  if (h.generation != generation_) return;
  auto& r = records_[h.index];
  if (r.gpu_us < 0) {
    r.gpu_us = 0;
    r.gpu_start_us = start_us;
    r.gpu_timed = true;
  }
  r.gpu_us += dur_us;
}

KILN_DECL void profiler::span(const char* name, double start_us, double end_us) {
  std::lock_guard lock(mutex_);
  spans_.push_back({name, profile_thread_number(), start_us, end_us - start_us});
  if (std::string_view(name) == "submit") submit_us_ += end_us - start_us;
  else if (std::string_view(name) == "wait") wait_us_ += end_us - start_us;
}

KILN_DECL void profiler::counter(const char* name, const char* k0, double v0, const char* k1, double v1) {
  std::lock_guard lock(mutex_);
  counters_.push_back({name, now_us(), {v0, v1}, {k0, k1}});
}

KILN_DECL std::vector<profile_record> profiler::records() const {
  std::lock_guard lock(mutex_);
  return records_;
}

KILN_DECL void profiler::clear() {
  std::lock_guard lock(mutex_);
  records_.clear();
  sampled_.clear();
  spans_.clear();
  // A counter track keeps its last value (re-stamped now): memory does not go away with
  // the records.
  std::vector<counter_sample> last;
  for (auto it = counters_.rbegin(); it != counters_.rend(); ++it) {
    const bool seen = std::any_of(last.begin(), last.end(),
                                  [&](const counter_sample& c) { return std::string_view(c.name) == it->name; });
    if (!seen) last.push_back(*it);
  }
  for (auto& c : last) c.at_us = now_us();
  counters_ = std::move(last);
  submit_us_ = wait_us_ = 0;
  ++generation_;
}

KILN_DECL void profiler::set_timing_note(std::string s) {
  std::lock_guard lock(mutex_);
  timing_note_ = std::move(s);
}

KILN_DECL void profiler::set_trace_path(std::string p) {
  std::lock_guard lock(mutex_);
  trace_path_ = std::move(p);
}

KILN_DECL void profile_slot::enable(bool v, const std::string& device) {
  if (v) {
    std::lock_guard lock(mutex_);
    if (!owner_) {
      owner_ = std::make_unique<profiler>(device);
      owner_->set_gpu_sampling(gpu_every);
      made_.store(owner_.get(), std::memory_order_release);
    }
  }
  on.store(v, std::memory_order_relaxed);
}

KILN_DECL void profile_slot::configure(std::optional<bool> option, const std::string& device) {
  const char* trace = std::getenv("KILN_TRACE");
  const bool tracing = trace && *trace;
  const bool want = option.value_or(env_flag("KILN_PROFILE")) || tracing;
  if (want) enable(true, device);
  if (tracing) get()->set_trace_path(trace);
}

// ---- the table -----------------------------------------------------------------------

KILN_DECL profile_report profiler::report() const {
  profile_report out;
  std::lock_guard lock(mutex_);
  out.device = device_;
  bool any_gpu = false, sampled = false;
  // Per row: the timed calls' GPU time, and that of the timed calls after the first (a
  // driver may compile a kernel on its first run: lavapipe's first dispatch carries the JIT).
  std::vector<double> gpu_sum, later_sum;
  std::vector<std::uint64_t> later;
  for (const auto& r : records_) {
    any_gpu = any_gpu || r.gpu_us >= 0;
    auto it = std::find_if(out.rows.begin(), out.rows.end(),
                           [&](const profile_row& x) { return x.name == r.name && x.variant == r.variant; });
    if (it == out.rows.end()) {
      it = out.rows.insert(out.rows.end(), profile_row{r.name, r.variant});
      gpu_sum.push_back(0);
      later_sum.push_back(0);
      later.push_back(0);
    }
    auto& row = *it;
    const auto i = static_cast<std::size_t>(it - out.rows.begin());
    ++row.calls;
    if (r.gpu_us >= 0) {
      if (row.timed) {
        later_sum[i] += r.gpu_us;
        ++later[i];
      }
      ++row.timed;
      gpu_sum[i] += r.gpu_us;
    }
    row.total_us += r.wall_us;  // replaced below by GPU time where the row has any
    row.host_us += r.wall_us;
    row.bytes += r.bytes;
    row.flops += r.flops;
    row.threads = std::max(row.threads, r.threads);
    out.host_us += r.wall_us;
  }
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    auto& row = out.rows[i];
    if (row.timed) {  // untimed calls (sampling) at the mean of the timed ones after the first
      const double mean = later[i] ? later_sum[i] / double(later[i]) : gpu_sum[i];
      row.total_us = gpu_sum[i] + mean * double(row.calls - row.timed);
    }
    sampled = sampled || (row.timed && row.timed < row.calls);
    out.total_us += row.total_us;
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const profile_row& a, const profile_row& b) { return a.total_us > b.total_us; });
  out.submit_us = submit_us_;
  out.wait_us = wait_us_;
  if (any_gpu && sampled) {
    out.timing = "GPU time (timestamp queries on one call in " + std::to_string(gpu_every_) +
                 " of each kernel; the others counted at the mean of the timed calls after the first)";
  } else if (any_gpu) {
    out.timing = "GPU time (timestamp queries)";
  }
  else if (!timing_note_.empty()) out.timing = "host wall time (" + timing_note_ + ")";
  else out.timing = "host wall time";
  return out;
}

// ---- the trace -----------------------------------------------------------------------

KILN_DECL void profiler::write_trace(const std::string& path) const {
  std::string j;
  {
    std::lock_guard lock(mutex_);
    j.reserve(256 + 256 * (records_.size() + spans_.size() + counters_.size()));
    j += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"device\":\"";
    json_escape(j, device_);
    j += "\",\"timing\":\"";
    json_escape(j, timing_note_);
    j += "\"},\"traceEvents\":[\n";
    j += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"kiln ";
    json_escape(j, device_);
    j += "\"}}";
    j += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"device: ";
    json_escape(j, device_);
    j += " kernels\"}}";
    std::vector<int> threads;
    auto thread_meta = [&](int t) {
      if (std::find(threads.begin(), threads.end(), t) != threads.end()) return;
      threads.push_back(t);
      j += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(t) +
           ",\"args\":{\"name\":\"host thread " + std::to_string(t) + "\"}}";
    };
    const bool gpu = device_.rfind("vulkan", 0) == 0;
    for (const auto& r : records_) {
      // Kernels on the device track: GPU time where measured, else (CPU) the statement's wall time.
      const bool on_device = !gpu || r.gpu_us >= 0;
      if (on_device) {
        j += ",\n{\"name\":\"";
        json_escape(j, r.name);
        j += "\",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":" +
             json_number(gpu ? r.gpu_start_us : r.start_us) + ",\"dur\":" + json_number(r.time_us()) + ",\"args\":{\"variant\":\"";
        json_escape(j, r.variant);
        j += "\",\"shape\":\"" + r.shape.to_string() + "\",\"dtype\":\"" + std::string(kiln::name(r.type)) +
             "\",\"bytes\":" + std::to_string(r.bytes) + ",\"flops\":" + std::to_string(r.flops) +
             ",\"host_us\":" + json_number(r.wall_us) +
             (gpu ? ",\"dispatches\":" + std::to_string(r.dispatches) : ",\"threads\":" + std::to_string(r.threads)) + "}}";
      }
      if (gpu) {  // the host side: recording the statement, on its thread's track
        thread_meta(r.thread);
        j += ",\n{\"name\":\"record ";
        json_escape(j, r.name);
        j += "\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(r.thread) +
             ",\"ts\":" + json_number(r.start_us) + ",\"dur\":" + json_number(r.wall_us) + "}";
      }
    }
    for (const auto& s : spans_) {
      thread_meta(s.thread);
      j += ",\n{\"name\":\"" + std::string(s.name) + "\",\"cat\":\"host\",\"ph\":\"X\",\"pid\":1,\"tid\":" +
           std::to_string(s.thread) + ",\"ts\":" + json_number(s.start_us) + ",\"dur\":" + json_number(s.dur_us) + "}";
    }
    for (const auto& c : counters_) {
      j += ",\n{\"name\":\"" + std::string(c.name) + "\",\"ph\":\"C\",\"pid\":1,\"ts\":" + json_number(c.at_us) +
           ",\"args\":{\"" + c.keys[0] + "\":" + json_number(c.values[0]);
      if (c.keys[1]) j += ",\"" + std::string(c.keys[1]) + "\":" + json_number(c.values[1]);
      j += "}}";
    }
    j += "\n]}\n";
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw error("kiln::write_trace: cannot open '" + tmp + "' for writing");
  const bool written = std::fwrite(j.data(), 1, j.size(), f) == j.size();
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    throw error("kiln::write_trace: cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw error("kiln::write_trace: cannot rename '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace kiln::detail

namespace kiln {

KILN_DECL std::string profile_report::str() const {
  auto fixed = [](double v, int prec) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", prec, v);
    return std::string(buf);
  };
  struct cell_row {
    std::vector<std::string> c;
  };
  std::vector<std::string> head = {"kernel", "calls", "total ms", "mean us", "GB/s", "GFLOP/s", "share"};
  const bool host_col = device.rfind("vulkan", 0) == 0;
  bool timed_col = false;
  for (const auto& r : rows) timed_col = timed_col || (r.timed && r.timed < r.calls);
  const bool thread_col = device == "cpu";
  if (host_col) head.insert(head.begin() + 4, "host us");
  if (thread_col) head.insert(head.begin() + 4, "threads");
  if (timed_col) head.insert(head.begin() + 2, "timed");
  std::vector<cell_row> body;
  for (const auto& r : rows) {
    cell_row cr;
    std::string name = r.name;
    if (r.variant != "elementwise" && !r.variant.empty()) name += "  [" + r.variant + "]";
    cr.c = {name, std::to_string(r.calls), fixed(r.total_us / 1e3, 3), fixed(r.mean_us(), 1),
            r.bytes ? fixed(r.gb_per_s(), 2) : "-", r.flops ? fixed(r.gflop_per_s(), 2) : "-",
            fixed(total_us > 0 ? 100.0 * r.total_us / total_us : 0.0, 1) + "%"};
    if (host_col) cr.c.insert(cr.c.begin() + 4, fixed(r.calls ? r.host_us / double(r.calls) : 0.0, 1));
    if (thread_col) cr.c.insert(cr.c.begin() + 4, std::to_string(r.threads));
    if (timed_col) cr.c.insert(cr.c.begin() + 2, std::to_string(r.timed));
    body.push_back(std::move(cr));
  }
  std::vector<std::size_t> w(head.size());
  for (std::size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& cr : body) {
    for (std::size_t i = 0; i < cr.c.size(); ++i) w[i] = std::max(w[i], cr.c[i].size());
  }
  w[0] = std::min<std::size_t>(w[0], 72);
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (std::size_t i = 0; i < c.size(); ++i) {
      std::string v = c[i];
      if (i == 0 && v.size() > w[0]) v = v.substr(0, w[0] - 3) + "...";
      const std::string pad(w[i] - std::min(w[i], v.size()), ' ');
      s += i == 0 ? v + pad : "  " + pad + v;
    }
    return s + "\n";
  };
  std::string s = "kiln profile: " + device + ", " + std::to_string(rows.size()) + " kernels, " + fixed(total_us / 1e3, 3) +
                  " ms; time: " + timing + "\n";
  s += line(head);
  for (const auto& cr : body) s += line(cr.c);
  if (host_col) {
    s += "host: recording " + fixed(host_us / 1e3, 3) + " ms, submitting " + fixed(submit_us / 1e3, 3) +
         " ms, waiting " + fixed(wait_us / 1e3, 3) + " ms\n";
  }
  return s;
}

}  // namespace kiln
