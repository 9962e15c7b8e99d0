// kiln/dist/communicator.hpp — kiln::dist::communicator: MPI collectives and point-to-point
// transfers on kiln tensors of any backend (CPU; Vulkan through host-visible memory).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>  // INT_MAX
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/dist/detail/host_access.hpp"
#include "kiln/dist/detail/runtime.hpp"
#include "kiln/dist/error.hpp"

namespace kiln::dist {

namespace detail {

enum class op_code : std::int32_t { all_reduce_sum = 1, all_gather, broadcast, send, split };

inline std::string_view op_name(op_code op) noexcept {
  switch (op) {
    case op_code::all_reduce_sum: return "all_reduce_sum";
    case op_code::all_gather: return "all_gather";
    case op_code::broadcast: return "broadcast";
    case op_code::send: return "send";
    case op_code::split: return "split";
  }
  return "?";
}

/// What each rank tells the others before a transfer: which call it is in (the operation
/// and the communicator's call count), the tensor's dtype and shape, the root, and whether
/// its own arguments were refused. Compared before any payload moves, so a mismatch is an
/// error on every rank instead of a hang or a wrong result.
struct descriptor {
  std::int32_t op = 0;
  std::int32_t dtype = -1;
  std::int32_t refused = 0;
  std::int32_t root = -1;
  std::int64_t call = 0;
  std::int32_t ndim = 0;
  std::int32_t elem_bytes = 0;
  std::int64_t dims[max_rank] = {};

  kiln::shape shape() const { return kiln::shape(std::span<const index_t>(dims, static_cast<std::size_t>(ndim))); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= dims[i];
    return n;
  }
  /// "f32[4, 9]"
  std::string text() const {
    return std::string(kiln::name(static_cast<kiln::dtype>(dtype))) + shape().to_string();
  }
  bool same_tensor(const descriptor& o) const {
    if (dtype != o.dtype || ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i) {
      if (dims[i] != o.dims[i]) return false;
    }
    return true;
  }
};

template <class T, class B>
descriptor describe(op_code op, std::int64_t call, const tensor<T, B>& t, int root, bool refused) {
  descriptor d;
  d.op = static_cast<std::int32_t>(op);
  d.dtype = static_cast<std::int32_t>(dtype_traits<T>::value);
  d.refused = refused ? 1 : 0;
  d.root = root;
  d.call = call;
  d.ndim = t.rank();
  d.elem_bytes = static_cast<std::int32_t>(sizeof(T));
  for (int i = 0; i < t.rank(); ++i) d.dims[i] = t.shape()[i];
  return d;
}

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, std::int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::int8_t>) return MPI_INT8_T;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return MPI_UINT8_T;
  else return MPI_UINT16_T;  // half, bfloat16: moved as their bits
}

/// MPI counts are int: larger transfers go in pieces of this many elements.
inline constexpr std::size_t max_chunk = std::size_t(1) << 30;

/// A tensor that MPI may write: defined, and no element aliased by a stride of 0.
template <class T, class B>
std::string refuse_output(const tensor<T, B>& t, const char* role) {
  if (!t.defined()) return std::string(role) + " is empty (default-constructed or moved from)";
  if (aliases_elements(t)) {
    return std::string(role) + " " + t.describe() + " is a broadcast view (a stride of 0), whose elements cannot be written";
  }
  return {};
}

}  // namespace detail

/// How long a communicator waits for its peers, and how long it leaves a thrown failure to
/// be reported before the job is aborted.
struct options {
  /// Longest wait for the other ranks in one operation; default KILN_DIST_TIMEOUT (seconds),
  /// else 60 s.
  std::chrono::milliseconds timeout = detail::env_seconds("KILN_DIST_TIMEOUT", std::chrono::seconds(60));
  /// After a timeout_error (or a failed MPI transfer), MPI_Abort follows this much later;
  /// default KILN_DIST_ABORT_GRACE (seconds), else 2 s.
  std::chrono::milliseconds abort_grace = detail::env_seconds("KILN_DIST_ABORT_GRACE", std::chrono::seconds(2));
};

/// A group of ranks and the operations between them, on kiln tensors of any backend.
///
/// Owns private duplicates of an MPI communicator (kiln's messages never meet the caller's).
/// Every operation is synchronous for the caller: pending backend work on the tensor is
/// finished first (Vulkan), and the result is in the tensor's elements when it returns.
/// Tensors are any kiln::tensor (views too); non-contiguous ones go through a contiguous
/// copy. Before any payload, the ranks exchange a small descriptor (operation, call number,
/// dtype, shape, root): a mismatch throws kiln::dist::error on every rank. Waits are
/// bounded by options::timeout: peers not heard from raise kiln::dist::timeout_error naming
/// them, and the job is aborted (MPI_Abort) after options::abort_grace.
/// Example: `auto comm = kiln::dist::communicator::world(); comm.all_reduce_sum(partial);`
class communicator {
 public:
  /// A duplicate of MPI_COMM_WORLD. Throws kiln::dist::error when MPI is not initialised
  /// (make a kiln::dist::environment first).
  static communicator world(const options& o = options()) { return communicator(MPI_COMM_WORLD, o); }

  /// A duplicate of comm (collective over comm: every rank of it must call).
  explicit communicator(MPI_Comm comm, const options& o = options()) : opts_(o) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      throw error("kiln::dist::communicator: MPI is not initialised; create a kiln::dist::environment first (or call MPI_Init)");
    }
    if (comm == MPI_COMM_NULL) throw error("kiln::dist::communicator: the MPI communicator is MPI_COMM_NULL");
    adopt(comm);
  }

  communicator(communicator&& o) noexcept
      : opts_(o.opts_), coll_(std::exchange(o.coll_, MPI_COMM_NULL)), p2p_(std::exchange(o.p2p_, MPI_COMM_NULL)),
        rank_(o.rank_), size_(o.size_), calls_(o.calls_), scratch_(std::move(o.scratch_)) {}
  communicator& operator=(communicator&& o) noexcept {
    if (this != &o) {
      release();
      opts_ = o.opts_;
      coll_ = std::exchange(o.coll_, MPI_COMM_NULL);
      p2p_ = std::exchange(o.p2p_, MPI_COMM_NULL);
      rank_ = o.rank_;
      size_ = o.size_;
      calls_ = o.calls_;
      scratch_ = std::move(o.scratch_);
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { release(); }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// The MPI communicator kiln's collectives run on (a private duplicate).
  MPI_Comm native() const noexcept { return coll_; }
  const dist::options& settings() const noexcept { return opts_; }
  void set_timeout(std::chrono::milliseconds t) { opts_.timeout = t; }

  /// Ranks with the same color form a new communicator, ordered by key (then by rank here).
  /// Collective: every rank calls it. color must be >= 0.
  /// Example: `auto row = comm.split(comm.rank() / 2, comm.rank());`
  communicator split(int color, int key) const {
    const std::string where = "kiln::dist::split: " + who();
    std::string refusal;
    if (color < 0) refusal = "color " + std::to_string(color) + " is negative (colors are >= 0)";
    detail::descriptor d;
    d.op = static_cast<std::int32_t>(detail::op_code::split);
    d.call = ++calls_;
    d.refused = refusal.empty() ? 0 : 1;
    agree(detail::op_code::split, d, "", refusal);
    MPI_Comm out = MPI_COMM_NULL;
    {
      detail::watch_guard g(deadline(), where + ": MPI_Comm_split did not finish within " +
                                            detail::seconds_text(opts_.timeout) + "; aborting the job (MPI_Abort)");
      detail::check(MPI_Comm_split(coll_, color, key, &out), where, "MPI_Comm_split", true, opts_.abort_grace);
    }
    communicator c(opts_);
    c.adopt(out);
    MPI_Comm_free(&out);
    return c;
  }

  /// Sums t over every rank, in place: afterwards each rank's t holds the sum.
  /// f32 and i32 are summed in their type; f16 and bf16 are summed in f32 (each rank's
  /// values widened, one MPI_Allreduce on floats, the sum rounded once), so every rank gets
  /// the same correctly rounded result. Throws kiln::dist::error when the ranks' tensors
  /// differ in dtype or shape. Example: `comm.all_reduce_sum(y);  // y: f32[tokens, dim]`
  template <class T, class B>
  void all_reduce_sum(const tensor<T, B>& t) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
                      std::is_same_v<T, std::int32_t>,
                  "kiln::dist::all_reduce_sum: sums f32, f16, bf16 and i32 tensors; convert others with kiln::cast<T>(x)");
    constexpr auto op = detail::op_code::all_reduce_sum;
    const std::string refusal = detail::refuse_output(t, "the tensor");
    const auto d = detail::describe(op, ++calls_, t, -1, !refusal.empty());
    agree(op, d, t.defined() ? t.describe() : "(empty)", refusal);
    if (size_ == 1 || t.numel() == 0) return;
    detail::host_span<T, B> h(t, detail::access::read_write, scratch_[0]);
    {
      detail::watch_guard g = payload_guard(op, t);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>) {
        for_chunks(h.size(), [&](std::size_t at, int n) {
          detail::check(MPI_Allreduce(MPI_IN_PLACE, h.data() + at, n, detail::mpi_type<T>(), MPI_SUM, coll_), where(op),
                        "MPI_Allreduce", true, opts_.abort_grace);
        });
      } else {
        // widened to f32: a 16-bit running sum would round at every step of the reduction
        if (scratch_[1].size() < h.size() * sizeof(float)) scratch_[1].resize(h.size() * sizeof(float));
        float* wide = reinterpret_cast<float*>(scratch_[1].data());
        const T* src = h.data();
        for (std::size_t i = 0; i < h.size(); ++i) wide[i] = static_cast<float>(src[i]);
        for_chunks(h.size(), [&](std::size_t at, int n) {
          detail::check(MPI_Allreduce(MPI_IN_PLACE, wide + at, n, MPI_FLOAT, MPI_SUM, coll_), where(op), "MPI_Allreduce",
                        true, opts_.abort_grace);
        });
        T* dst = h.data();
        for (std::size_t i = 0; i < h.size(); ++i) dst[i] = T(wide[i]);
      }
    }
    h.finish();
  }

  /// Concatenates every rank's `in` along axis 0 into `out`, in rank order, on every rank:
  /// out's shape is in's with axis 0 times size(). in must have the same dtype and shape on
  /// every rank (rank >= 1). Any dtype. Example: `comm.all_gather(logits_slice, logits);`
  template <class T, class B>
  void all_gather(const tensor<T, B>& in, const tensor<T, B>& out) {
    constexpr auto op = detail::op_code::all_gather;
    std::string refusal;
    if (!in.defined()) refusal = "the input is empty (default-constructed or moved from)";
    else if (in.rank() == 0) refusal = "the input " + in.describe() + " has no axis 0 to gather along (rank 0)";
    if (refusal.empty()) refusal = detail::refuse_output(out, "the output");
    if (refusal.empty()) {
      bool fits = out.rank() == in.rank() && out.shape()[0] == in.shape()[0] * size_;
      for (int i = 1; fits && i < in.rank(); ++i) fits = out.shape()[i] == in.shape()[i];
      if (!fits) {
        kiln::shape want = in.shape();
        want[0] *= size_;
        refusal = "the output " + out.describe() + " is not the input " + in.describe() + " gathered from " +
                  std::to_string(size_) + " ranks (" + std::string(dtype_name_v<T>) + want.to_string() + ")";
      } else if (in.numel() > static_cast<index_t>(INT_MAX)) {
        refusal = "the input " + in.describe() + " holds more than 2^31 - 1 elements (MPI_Allgather's count)";
      }
    }
    const auto d = detail::describe(op, ++calls_, in, -1, !refusal.empty());
    agree(op, d, in.defined() ? in.describe() : "(empty)", refusal);
    if (in.numel() == 0) return;
    // an input that shares the output's storage is read from a copy (MPI's buffers must not overlap)
    const tensor<T, B> src = in.storage() == out.storage() ? in.clone() : in;
    detail::host_span<T, B> hi(src, detail::access::read, scratch_[0]);
    detail::host_span<T, B> ho(out, detail::access::write, scratch_[1]);
    {
      detail::watch_guard g = payload_guard(op, in);
      const int n = static_cast<int>(hi.size());
      detail::check(MPI_Allgather(hi.data(), n, detail::mpi_type<T>(), ho.data(), n, detail::mpi_type<T>(), coll_),
                    where(op), "MPI_Allgather", true, opts_.abort_grace);
    }
    ho.finish();
  }

  /// Copies root's t into t on every other rank. Any dtype; t's dtype and shape must agree
  /// on every rank. Example: `comm.broadcast(weights, 0);`
  template <class T, class B>
  void broadcast(const tensor<T, B>& t, int root) {
    constexpr auto op = detail::op_code::broadcast;
    std::string refusal;
    if (root < 0 || root >= size_) {
      refusal = "root " + std::to_string(root) + " is not a rank of this communicator (0 to " + std::to_string(size_ - 1) + ")";
    } else {
      refusal = detail::refuse_output(t, "the tensor");
    }
    const auto d = detail::describe(op, ++calls_, t, root, !refusal.empty());
    agree(op, d, t.defined() ? t.describe() : "(empty)", refusal);
    if (size_ == 1 || t.numel() == 0) return;
    detail::host_span<T, B> h(t, rank_ == root ? detail::access::read : detail::access::write, scratch_[0]);
    {
      detail::watch_guard g = payload_guard(op, t);
      for_chunks(h.size(), [&](std::size_t at, int n) {
        detail::check(MPI_Bcast(h.data() + at, n, detail::mpi_type<T>(), root, coll_), where(op), "MPI_Bcast", true,
                      opts_.abort_grace);
      });
    }
    h.finish();
  }

  /// Sends t to rank dest, to be received by recv(·, rank(), tag) there. Returns when the
  /// data has left t (MPI_Isend completed), not necessarily when dest has it. Any dtype;
  /// tag in 0 to MPI_TAG_UB. Example: `if (comm.rank() == 0) comm.send(x, 1, 7);`
  template <class T, class B>
  void send(const tensor<T, B>& t, int dest, int tag) {
    constexpr auto op = detail::op_code::send;
    check_peer("send", dest, tag, "dest");
    std::string refusal;
    if (!t.defined()) refusal = "the tensor is empty (default-constructed or moved from)";
    const auto d = detail::describe(op, 0, t, rank_, !refusal.empty());
    const std::string w = "kiln::dist::send: " + who();
    if (!refusal.empty()) {
      // dest is told, so that its recv throws instead of waiting
      MPI_Request r = MPI_REQUEST_NULL;
      detail::check(MPI_Isend(&d, sizeof d, MPI_BYTE, dest, tag, p2p_, &r), w, "MPI_Isend", true, opts_.abort_grace);
      wait_peer(std::span(&r, 1), w, dest, "to take the message", t.describe());
      throw error(w + ": " + refusal);
    }
    detail::host_span<T, B> h(t, detail::access::read, scratch_[0]);
    std::vector<MPI_Request> reqs(1, MPI_REQUEST_NULL);
    detail::check(MPI_Isend(&d, sizeof d, MPI_BYTE, dest, tag, p2p_, &reqs[0]), w, "MPI_Isend", true, opts_.abort_grace);
    for_chunks(h.size(), [&](std::size_t at, int n) {
      reqs.push_back(MPI_REQUEST_NULL);
      detail::check(MPI_Isend(h.data() + at, n, detail::mpi_type<T>(), dest, tag, p2p_, &reqs.back()), w, "MPI_Isend", true,
                    opts_.abort_grace);
    });
    wait_peer(reqs, w, dest, "to receive", t.describe());
  }

  /// Receives into t what rank src sent with send(·, rank(), tag). t's dtype and shape must
  /// be those of the sent tensor: otherwise the message is consumed and kiln::dist::error
  /// names both. Example: `if (comm.rank() == 1) comm.recv(x, 0, 7);`
  template <class T, class B>
  void recv(const tensor<T, B>& t, int src, int tag) {
    constexpr auto op = detail::op_code::send;
    check_peer("recv", src, tag, "src");
    const std::string w = "kiln::dist::recv: " + who();
    detail::descriptor theirs;
    MPI_Request r = MPI_REQUEST_NULL;
    detail::check(MPI_Irecv(&theirs, sizeof theirs, MPI_BYTE, src, tag, p2p_, &r), w, "MPI_Irecv", true, opts_.abort_grace);
    const std::string mine = t.defined() ? t.describe() : "(empty)";
    wait_peer(std::span(&r, 1), w, src, "to send", mine);
    if (theirs.op != static_cast<std::int32_t>(op)) throw error(w + ": the message from rank " + std::to_string(src) + " is not a kiln::dist::send");
    if (theirs.refused) throw error(w + ": rank " + std::to_string(src) + " refused its send (its own error says why)");
    std::string refusal = detail::refuse_output(t, "the tensor");
    const auto d = detail::describe(op, 0, t, src, false);
    if (refusal.empty() && !d.same_tensor(theirs)) {
      refusal = "tensor " + mine + " does not match rank " + std::to_string(src) + "'s " + theirs.text() + " (tag " +
                std::to_string(tag) + ")";
    }
    if (!refusal.empty()) {
      // take the payload anyway, so that rank src's send completes and no message is left behind
      const std::size_t bytes = static_cast<std::size_t>(theirs.numel()) * static_cast<std::size_t>(theirs.elem_bytes);
      if (scratch_[0].size() < bytes) scratch_[0].resize(bytes);
      std::vector<MPI_Request> reqs;
      for_chunks(bytes, [&](std::size_t at, int n) {
        reqs.push_back(MPI_REQUEST_NULL);
        detail::check(MPI_Irecv(scratch_[0].data() + at, n, MPI_BYTE, src, tag, p2p_, &reqs.back()), w, "MPI_Irecv", true,
                      opts_.abort_grace);
      });
      wait_peer(reqs, w, src, "to send", mine);
      throw error(w + ": " + refusal);
    }
    detail::host_span<T, B> h(t, detail::access::write, scratch_[0]);
    std::vector<MPI_Request> reqs;
    for_chunks(h.size(), [&](std::size_t at, int n) {
      reqs.push_back(MPI_REQUEST_NULL);
      detail::check(MPI_Irecv(h.data() + at, n, detail::mpi_type<T>(), src, tag, p2p_, &reqs.back()), w, "MPI_Irecv", true,
                    opts_.abort_grace);
    });
    wait_peer(reqs, w, src, "to send", mine);
    h.finish();
  }

 private:
  explicit communicator(const dist::options& o) : opts_(o) {}

  void adopt(MPI_Comm comm) {
    const std::string w = "kiln::dist::communicator";
    MPI_Comm coll = MPI_COMM_NULL, p2p = MPI_COMM_NULL;
    {
      detail::watch_guard g(deadline(), w + ": MPI_Comm_dup did not finish within " + detail::seconds_text(opts_.timeout) +
                                            " (a rank did not create its communicator); aborting the job (MPI_Abort)");
      detail::check(MPI_Comm_dup(comm, &coll), w, "MPI_Comm_dup");
      if (int rc = MPI_Comm_dup(comm, &p2p); rc != MPI_SUCCESS) {
        MPI_Comm_free(&coll);
        detail::check(rc, w, "MPI_Comm_dup");
      }
    }
    coll_ = coll;
    p2p_ = p2p;
    MPI_Comm_set_errhandler(coll_, detail::error_handler());
    MPI_Comm_set_errhandler(p2p_, detail::error_handler());
    MPI_Comm_rank(coll_, &rank_);
    MPI_Comm_size(coll_, &size_);
  }

  void release() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // after a failure the job is being aborted: freeing could wait for a dead peer
    if (finalized || detail::watchdog::instance().failed()) return;
    if (coll_ != MPI_COMM_NULL) MPI_Comm_free(&coll_);
    if (p2p_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_);
  }

  std::string who() const { return "rank " + std::to_string(rank_) + " of " + std::to_string(size_); }
  std::string where(detail::op_code op) const { return "kiln::dist::" + std::string(detail::op_name(op)) + ": " + who(); }
  detail::clock::time_point deadline() const { return detail::clock::now() + opts_.timeout; }

  template <class T, class B>
  detail::watch_guard payload_guard(detail::op_code op, const tensor<T, B>& t) const {
    return detail::watch_guard(deadline(), where(op) + ": the transfer of " + t.describe() + " did not finish within " +
                                               detail::seconds_text(opts_.timeout) +
                                               " (every rank had joined the call; one stopped during it); aborting the job (MPI_Abort)");
  }

  template <class F>
  static void for_chunks(std::size_t count, F&& f) {
    for (std::size_t at = 0; at < count; at += detail::max_chunk) {
      f(at, static_cast<int>(std::min(detail::max_chunk, count - at)));
    }
  }

  void check_peer(const char* op, int peer, int tag, const char* role) const {
    const std::string w = std::string("kiln::dist::") + op + ": " + who();
    if (peer < 0 || peer >= size_) {
      throw error(w + ": " + role + " " + std::to_string(peer) + " is not a rank of this communicator (0 to " +
                  std::to_string(size_ - 1) + ")");
    }
    if (peer == rank_) throw error(w + ": " + role + " is this rank itself");
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(p2p_, MPI_TAG_UB, &ub, &flag);
    const int tag_ub = flag && ub ? *ub : 32767;
    if (tag < 0 || tag > tag_ub) {
      throw error(w + ": tag " + std::to_string(tag) + " is outside 0 to " + std::to_string(tag_ub) + " (MPI_TAG_UB)");
    }
  }

  /// Waits for point-to-point requests with peer; a timeout names it.
  void wait_peer(std::span<MPI_Request> reqs, const std::string& w, int peer, const char* waiting_for,
                 const std::string& tensor_text) const {
    if (detail::wait_all(reqs, deadline(), w).empty()) return;
    fail_timeout(w + ": timed out after " + detail::seconds_text(opts_.timeout) + " waiting for rank " +
                     std::to_string(peer) + " " + waiting_for + " (not heard from; tensor " + tensor_text + ")",
                 {peer});
  }

  [[noreturn]] void fail_timeout(const std::string& message, std::vector<int> ranks) const {
    detail::watchdog::instance().abort_at(detail::clock::now() + opts_.abort_grace);
    throw timeout_error(message + "; the job is being aborted (MPI_Abort)", std::move(ranks));
  }

  /// The descriptor exchange before a collective: every rank sends its descriptor to every
  /// other and waits, until the deadline, for theirs. Those not heard from are named in a
  /// timeout_error. Then every rank applies the same checks to the same descriptors, so
  /// all throw (each from its own point of view) or none does.
  void agree(detail::op_code op, const detail::descriptor& mine, const std::string& mine_text,
             const std::string& refusal) const {
    const std::string w = where(op);
    if (size_ > 1) {
      constexpr int tag = 1;  // the collectives' descriptors: their own communicator, one tag
      std::vector<detail::descriptor> all(static_cast<std::size_t>(size_));
      std::vector<MPI_Request> reqs(2 * static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        detail::check(MPI_Irecv(&all[p], sizeof(detail::descriptor), MPI_BYTE, p, tag, coll_, &reqs[2 * p]), w, "MPI_Irecv",
                      true, opts_.abort_grace);
        detail::check(MPI_Isend(&mine, sizeof(detail::descriptor), MPI_BYTE, p, tag, coll_, &reqs[2 * p + 1]), w,
                      "MPI_Isend", true, opts_.abort_grace);
      }
      const auto pending = detail::wait_all(reqs, deadline(), w);
      if (!pending.empty()) {
        std::vector<int> silent;
        for (int i : pending) {
          if (i % 2 == 0) silent.push_back(i / 2);
        }
        if (silent.empty()) {  // heard from all, but a send is stuck: its peer stopped receiving
          for (int i : pending) silent.push_back(i / 2);
        }
        fail_timeout(w + ": timed out after " + detail::seconds_text(opts_.timeout) + " waiting for " +
                         detail::rank_list(silent) + " (not heard from; tensor " + mine_text + ")",
                     silent);
      }
      all[static_cast<std::size_t>(rank_)] = mine;
      if (!refusal.empty()) throw error(w + ": " + refusal);
      std::vector<int> refused;
      for (int p = 0; p < size_; ++p) {
        if (all[p].refused) refused.push_back(p);
      }
      if (!refused.empty()) {
        throw error(w + ": " + detail::rank_list(refused) + " refused " + (refused.size() == 1 ? "its" : "their") +
                    " arguments (the error there says why)");
      }
      for (int p = 0; p < size_; ++p) {
        const auto& o = all[p];
        if (p == rank_) continue;
        if (o.op != mine.op || o.call != mine.call) {
          throw error(w + ": call " + std::to_string(mine.call) + " on this communicator is " +
                      std::string(detail::op_name(op)) + " here, but rank " + std::to_string(p) + " is in call " +
                      std::to_string(o.call) + ", " + std::string(detail::op_name(static_cast<detail::op_code>(o.op))) +
                      " (every rank must make the same calls in the same order)");
        }
        if (o.root != mine.root) {
          throw error(w + ": root " + std::to_string(mine.root) + " here, but root " + std::to_string(o.root) + " on rank " +
                      std::to_string(p));
        }
        if (!o.same_tensor(mine)) {
          throw error(w + ": tensor " + mine_text + " does not match rank " + std::to_string(p) + "'s " + o.text());
        }
      }
    } else if (!refusal.empty()) {
      throw error(w + ": " + refusal);
    }
  }

  dist::options opts_;
  MPI_Comm coll_ = MPI_COMM_NULL;  ///< collectives and their descriptors
  MPI_Comm p2p_ = MPI_COMM_NULL;   ///< send / recv (user tags)
  int rank_ = 0;
  int size_ = 1;
  mutable std::int64_t calls_ = 0;
  /// host copies: staged tensors (non-mapped device memory), f16/bf16 widened to f32
  std::array<std::vector<std::byte>, 2> scratch_;
};

}  // namespace kiln::dist
