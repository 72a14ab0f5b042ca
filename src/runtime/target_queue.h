// Dynamic hand-out of targets across MPI ranks (the optional MPI build): rank 0 serves the
// targets in the order it is given (longest first) to whichever rank asks next, so one slow
// target does not leave the other ranks idle behind a static split.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace bioinfer::runtime {

class TargetQueue {
public:
    virtual ~TargetQueue() = default;
    // The next task (an index into the order rank 0 was given), or -1 when none is left.
    // Thread-safe.
    virtual int64_t next() = 0;
};

// Non-null only in an MPI build launched under an MPI launcher with more than one rank: then
// MPI is initialised (and finalised when the queue goes) and `order` (the same on every rank)
// is served by rank 0.
std::unique_ptr<TargetQueue> mpi_target_queue(const std::vector<int64_t>& order);

// In an MPI build under a launcher with several ranks: initialises MPI and returns a guard whose
// end waits for every rank (a barrier) and finalises, so that no rank exits (perhaps with status
// 2, which makes mpirun stop the others) while another still works. Null otherwise.
std::shared_ptr<void> mpi_session();

// Whether this binary was built with MPI.
bool built_with_mpi();

}  // namespace bioinfer::runtime
