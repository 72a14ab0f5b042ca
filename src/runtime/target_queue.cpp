// Rank 0 runs a server thread answering "next?" requests from the other ranks; its own workers
// take from the same counter directly. Waiting is done by polling with short sleeps, never in a
// blocking MPI call (those spin on a core). A rank that has been told "none left" stops asking, so the
// server ends after one final answer per rank. Only one thread per rank talks to MPI at a time
// (MPI_THREAD_SERIALIZED).
#include "runtime/target_queue.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bioinfer/error.h"

#ifdef BIOINFER_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (OpenMPI's C++ bindings need their own library)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace bioinfer::runtime {

bool built_with_mpi() {
#ifdef BIOINFER_WITH_MPI
    return true;
#else
    return false;
#endif
}

#ifdef BIOINFER_WITH_MPI

namespace {

constexpr int kAsk = 1, kAnswer = 2, kQuit = 3;

// MPI's blocking calls spin on a core while they wait; a rank that waits (for a request, for
// the others to finish) polls and sleeps instead, leaving the core to the ranks still working.
void wait_for(MPI_Request& req) {
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

int launched_ranks() {
    const char* ompi = std::getenv("OMPI_COMM_WORLD_SIZE");
    const char* pmi = std::getenv("PMI_SIZE");
    return ompi ? std::atoi(ompi) : pmi ? std::atoi(pmi) : 0;
}

struct Session {
    Session() {
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
        BI_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI", "the MPI library does not allow calls from several threads");
    }
    ~Session() {
        MPI_Request req;
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        wait_for(req);
        MPI_Finalize();
    }
};

class MpiQueue : public TargetQueue {
public:
    MpiQueue(const std::vector<int64_t>& order, std::shared_ptr<void> session, int rank, int size)
        : order_(order), session_(std::move(session)), rank_(rank), size_(size) {
        if (rank_ == 0) server_ = std::thread([this] { serve(); });
    }
    ~MpiQueue() override {
        if (server_.joinable()) server_.join();
        // a rank leaving early (an error) tells rank 0 it asks no more, so rank 0 does not wait
        std::lock_guard<std::mutex> lock(mu_);
        if (rank_ != 0 && !exhausted_) {
            const char quit = 0;
            MPI_Send(&quit, 1, MPI_CHAR, 0, kQuit, MPI_COMM_WORLD);
        }
    }
    int64_t next() override {
        if (rank_ == 0) return take();
        std::lock_guard<std::mutex> lock(mu_);
        if (exhausted_) return -1;
        long long got = -1;
        const char ask = 0;
        MPI_Send(&ask, 1, MPI_CHAR, 0, kAsk, MPI_COMM_WORLD);
        MPI_Request req;
        MPI_Irecv(&got, 1, MPI_LONG_LONG, 0, kAnswer, MPI_COMM_WORLD, &req);
        wait_for(req);
        if (got < 0) exhausted_ = true;
        return got;
    }

private:
    int64_t take() {
        const size_t i = counter_++;
        return i < order_.size() ? order_[i] : -1;
    }
    void serve() {
        int done = 0;
        while (done < size_ - 1) {
            char ask = 0;
            MPI_Status st;
            int waiting = 0;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &waiting, &st);
            if (!waiting) {
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                continue;
            }
            MPI_Recv(&ask, 1, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG == kQuit) {
                ++done;
                continue;
            }
            const long long answer = take();
            MPI_Send(&answer, 1, MPI_LONG_LONG, st.MPI_SOURCE, kAnswer, MPI_COMM_WORLD);
            done += answer < 0;
        }
    }
    std::vector<int64_t> order_;
    std::shared_ptr<void> session_;  // ends (barrier, finalise) after the server thread
    int rank_, size_;
    std::atomic<size_t> counter_{0};
    std::mutex mu_;
    bool exhausted_ = false;
    std::thread server_;
};

}  // namespace

std::shared_ptr<void> mpi_session() {
    if (launched_ranks() <= 1) return nullptr;  // only under a launcher that started several
    return std::make_shared<Session>();
}

std::unique_ptr<TargetQueue> mpi_target_queue(const std::vector<int64_t>& order) {
    std::shared_ptr<void> session = mpi_session();
    if (!session) return nullptr;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return std::make_unique<MpiQueue>(order, std::move(session), rank, size);
}

#else

std::shared_ptr<void> mpi_session() { return nullptr; }
std::unique_ptr<TargetQueue> mpi_target_queue(const std::vector<int64_t>&) { return nullptr; }

#endif

}  // namespace bioinfer::runtime
