// Chain naming for targets read without chain ids (FASTA records of ':'-separated chains).
#include "bio/target.h"

namespace bioinfer::bio {

std::string chain_id(int32_t c) {
    static const std::string k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (c < int32_t(k.size())) return std::string(1, k[size_t(c)]);
    return std::string(1, k[size_t(c / int32_t(k.size()) - 1)]) + k[size_t(c % int32_t(k.size()))];
}

}  // namespace bioinfer::bio
