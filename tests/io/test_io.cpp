// I/O and runtime units: safetensors validation, model directories, FASTA, npz/h5 round trips,
// the tokenizer's errors, and length batching.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/fasta.h"
#include "io/h5.h"
#include "io/model_dir.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "test_util.h"

using namespace bioinfer;
namespace fs = std::filesystem;

namespace {

using test::error_of;
using test::expect_contains;
using test::TempDir;

using test::write_bytes;

std::string make_st(const std::string& header, size_t data_bytes) {
    std::string s(8, '\0');
    uint64_t n = header.size();
    std::memcpy(s.data(), &n, 8);
    return s + header + std::string(data_bytes, '\0');
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypes) {
    TempDir d;
    Tensor a = test::random_tensor({3, 5}, 1);
    Tensor h = Tensor::empty({4}, DType::BF16), f = Tensor::empty({2}, DType::F16);
    uint16_t* hp = static_cast<uint16_t*>(h.raw());
    for (int i = 0; i < 4; ++i) hp[i] = f32_to_bf16(float(i) - 1.5f);
    uint16_t* fp = static_cast<uint16_t*>(f.raw());
    fp[0] = 0x3c00;  // 1.0
    fp[1] = 0xc500;  // -5.0
    io::write_safetensors(d / "x.safetensors", {{"a", a}, {"h", h}, {"f", f}});
    auto st = io::SafetensorsFile::open(d / "x.safetensors");
    Tensor a2 = st->get("a");
    EXPECT_EQ(a2.shape(), a.shape());
    EXPECT_EQ(std::memcmp(a2.raw(), a.raw(), 60), 0);
    Tensor h2 = st->get("h").to_f32();
    EXPECT_FLOAT_EQ(h2.f32()[0], -1.5f);
    EXPECT_FLOAT_EQ(h2.f32()[3], 1.5f);
    Tensor f2 = st->get("f").to_f32();
    EXPECT_FLOAT_EQ(f2.f32()[0], 1.0f);
    EXPECT_FLOAT_EQ(f2.f32()[1], -5.0f);
}

TEST(Safetensors, RejectsCorruptFiles) {
    TempDir d;
    write_bytes(d / "short", "abc");
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "short"); }), "at least 8");
    write_bytes(d / "hlen", make_st("{}", 0).replace(0, 8, std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8)));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "hlen"); }), "header length");
    write_bytes(d / "json", make_st("{not json", 0));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "json"); }), "not valid JSON");
    write_bytes(d / "dtype", make_st(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "dtype"); }), "tensor 'w'");
    // Integer buffers are size-checked and skipped; asking for one names its dtype.
    write_bytes(d / "int", make_st(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
    auto with_int = io::SafetensorsFile::open(d / "int");
    EXPECT_FALSE(with_int->has("w"));
    expect_contains(error_of([&] { with_int->get("w"); }), "tensor 'w' is I64");
    write_bytes(d / "intsize", make_st(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", 8));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "intsize"); }), "needs 16");
    write_bytes(d / "trunc", make_st(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "trunc"); }), "truncated");
    write_bytes(d / "size", make_st(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "size"); }), "needs 12");
    write_bytes(d / "overlap",
                make_st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12));
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "overlap"); }), "overlap");
    expect_contains(error_of([&] { io::SafetensorsFile::open(d / "missing"); }), "cannot open");
}

TEST(ModelDir, ShardedAndErrorsNameTheKey) {
    const std::string fx = std::string(BIOINFER_FIXTURES) + "/esm2_tiny_hd12";
    auto m = io::ModelDir::open(fx);
    EXPECT_TRUE(m.has("lm_head.bias"));
    EXPECT_TRUE(m.has("esm.encoder.layer.1.output.dense.weight"));
    expect_contains(error_of([&] { m.get_f32("lm_head.bias", {34}); }),
                    "tensor 'lm_head.bias': expected shape [34], got [33]");
    expect_contains(error_of([&] { m.get_f32("nope", {1}); }), "missing tensor 'nope'");
    TempDir d;
    expect_contains(error_of([&] { io::ModelDir::open(d.path.string()); }), "config.json");
    write_bytes(d / "config.json", "{}");
    expect_contains(error_of([&] { io::ModelDir::open(d.path.string()); }), "no model.safetensors");
    write_bytes(d / "config.json", "{oops");
    expect_contains(error_of([&] { io::ModelDir::open(d.path.string()); }), "not valid JSON");
}

TEST(Fasta, ParsesAndRejects) {
    auto r = io::parse_fasta(">a desc here\r\nMK\nTV*\n\n>b\nGG\n", "t.fa");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].id, "a");
    EXPECT_EQ(r[0].description, "a desc here");
    EXPECT_EQ(r[0].sequence, "MKTV");
    EXPECT_EQ(r[1].line, 5);
    expect_contains(error_of([] { io::parse_fasta(">a\n>b\nMK\n", "t.fa"); }),
                    "[t.fa:1] record 'a' has an empty sequence");
    expect_contains(error_of([] { io::parse_fasta("MKV\n", "t.fa"); }), "before the first '>'");
    expect_contains(error_of([] { io::parse_fasta(">\nMK\n", "t.fa"); }), "no id");
    expect_contains(error_of([] { io::parse_fasta("", "t.fa"); }), "no FASTA records");
}

TEST(Fasta, ReadsSharedData) {
    auto r = io::read_fasta(std::string(BIOINFER_PUBLIC_DATA) + "/sequences.fasta");
    EXPECT_GE(r.size(), 5u);
    for (auto& x : r) EXPECT_FALSE(x.sequence.empty()) << x.id;
}

TEST(Npz, RoundTrip) {
    TempDir d;
    Tensor a = test::random_tensor({3, 7}, 2), b = test::random_tensor({5}, 3);
    io::write_npz(d / "x.npz", {{"a", a.shape(), a.f32()}, {"b", b.shape(), b.f32()}});
    auto m = io::read_npz(d / "x.npz");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m["a"].shape, a.shape());
    EXPECT_EQ(m["b"].shape, b.shape());
    EXPECT_EQ(std::memcmp(m["a"].data.data(), a.f32(), 21 * 4), 0);
    EXPECT_EQ(std::memcmp(m["b"].data.data(), b.f32(), 5 * 4), 0);
    // the shapes alone, from the headers
    const auto shapes = io::npz_shapes(d / "x.npz");
    EXPECT_EQ(shapes, (std::map<std::string, Shape>{{"a", a.shape()}, {"b", b.shape()}}));
    write_bytes(d / "cut.npz", io::read_file(d / "x.npz").substr(0, 40));
    expect_contains(error_of([&] { io::npz_shapes(d / "cut.npz"); }), "cut.npz");
    for (auto& e : fs::directory_iterator(d.path))  // no temporary left behind
        EXPECT_EQ(e.path().filename().string()[0] == '.', false) << e.path();
}

// read_npz goes through the zip directory and checks every member: its CRC-32, its .npy header
// against its size. numpy.savez's members (zip64 local headers, sizes only in the directory) are
// all read, not only the first.
TEST(Npz, ChecksEveryMemberThroughTheZipDirectory) {
    TempDir d;
    const auto savez =
        io::read_npz(std::string(BIOINFER_FIXTURES) + "/../fuzz/regressions/npz/seed-savez.npz");
    ASSERT_EQ(savez.size(), 2u);
    EXPECT_EQ(savez.at("mean").shape, (Shape{8}));
    EXPECT_EQ(savez.at("per_tok").shape, (Shape{3, 4}));
    EXPECT_EQ(savez.at("per_tok").data, std::vector<float>(12, 1.0f));

    Tensor a = test::random_tensor({4, 6}, 5);
    io::write_npz(d / "x.npz", {{"a", a.shape(), a.f32()}});
    const std::string good = io::read_file(d / "x.npz");
    const size_t npy = good.find("\x93NUMPY"), cd = good.find("PK\x01\x02");
    const size_t data = npy + 10 + (uint8_t(good[npy + 8]) | uint8_t(good[npy + 9]) << 8);
    std::string bad = good;
    bad[(data + cd) / 2] ^= 1;  // one bit of one value
    write_bytes(d / "flip.npz", bad);
    expect_contains(error_of([&] { io::read_npz(d / "flip.npz"); }),
                    "flip.npz] zip entry 'a.npy' is damaged: its bytes do not match the CRC-32");
    EXPECT_EQ(io::npz_shapes(d / "flip.npz").at("a"), a.shape());  // headers only: no CRC
    write_bytes(d / "cut.npz", good.substr(0, cd + 10));  // the directory cut short
    expect_contains(error_of([&] { io::read_npz(d / "cut.npz"); }), "cut.npz] not an npz file");
    // a header whose shape does not fill the member: the CRC-32 (which covers the header) and,
    // headers only, the size
    bad = good;
    const size_t dim = bad.find("(4,6)");
    ASSERT_NE(dim, std::string::npos);
    bad.replace(dim, 5, "(4,5)");
    write_bytes(d / "shape.npz", bad);
    expect_contains(error_of([&] { io::read_npz(d / "shape.npz"); }), "zip entry 'a.npy' is damaged");
    expect_contains(error_of([&] { io::npz_shapes(d / "shape.npz"); }),
                    "member 'a.npy' holds 96 bytes of data where its shape (4,5) needs 80");
}

TEST(H5, RoundTripAndAtomic) {
    TempDir d;
    Tensor a = test::random_tensor({4, 3}, 4);
    {
        io::H5Writer w(d / "e.h5");
        w.write("/P1", a.shape(), a.f32());
        w.write("/mean_2/P1", {3}, a.f32());
        EXPECT_FALSE(fs::exists(d / "e.h5"));  // only the temporary exists until commit
        w.commit();
    }
    Shape s;
    auto v = io::h5_read(d / "e.h5", "/P1", &s);
    EXPECT_EQ(s, a.shape());
    EXPECT_EQ(std::memcmp(v.data(), a.f32(), 12 * 4), 0);
    io::h5_read(d / "e.h5", "/mean_2/P1", &s);
    EXPECT_EQ(s, (Shape{3}));
    {
        io::H5Writer w(d / "f.h5");
        w.write("/x", {1}, a.f32());
    }  // destroyed without commit
    EXPECT_FALSE(fs::exists(d / "f.h5"));
    EXPECT_TRUE(fs::is_empty(d.path) || !fs::exists(d / ".f.h5.tmp"));
}

// The restricted unpickler: a real torch.save state dict loads (bf16 views, names as saved); a
// pickle that calls os.system is refused before anything runs; damaged archives name the problem.
TEST(TorchCheckpoint, ReadsStateDictAndRefusesHostilePickles) {
    const std::string fx = BIOINFER_FIXTURES;
    auto sd = io::read_torch_checkpoint(fx + "/esmc_tiny_pth/data/weights/esmc_tiny_pth_v0.pth");
    ASSERT_TRUE(sd.count("embed.weight"));
    EXPECT_EQ(sd.at("embed.weight").shape(), (Shape{64, 128}));
    EXPECT_EQ(sd.at("embed.weight").dtype(), DType::BF16);
    EXPECT_EQ(sd.at("transformer.blocks.1.attn.layernorm_qkv.1.weight").shape(), (Shape{384, 128}));

    const std::string marker = "/tmp/bioinfer_pickle_was_executed";
    fs::remove(marker);
    const std::string e = error_of([&] { io::read_torch_checkpoint(fx + "/hostile_checkpoints/os_system.pth"); });
    expect_contains(e, "refusing to load");
    expect_contains(e, "posix.system");
    EXPECT_FALSE(fs::exists(marker)) << "the pickle's payload ran";
    // Through the model loader too: a directory holding only the hostile file is refused.
    TempDir d;
    fs::copy_file(fx + "/hostile_checkpoints/os_system.pth", d / "model.pth");
    expect_contains(error_of([&] { io::ModelDir::open(d.path.string()); }), "refusing to load");
    EXPECT_FALSE(fs::exists(marker));

    expect_contains(error_of([&] { io::read_torch_checkpoint(fx + "/hostile_checkpoints/truncated.pth"); }),
                    "truncated.pth");
    std::ofstream(d / "not_zip.pth") << "not a zip archive at all, just text";
    expect_contains(error_of([&] { io::read_torch_checkpoint(d / "not_zip.pth"); }), "not a torch checkpoint");

    // A trainer checkpoint may hold objects among its options but not among its weights.
    const std::string t = error_of([&] { io::read_torch_checkpoint(fx + "/hostile_checkpoints/trainer_os_system.ckpt"); });
    expect_contains(t, "refusing to load");
    expect_contains(t, "posix.system");
    EXPECT_FALSE(fs::exists(marker));
}

// A Lightning checkpoint (Boltz-2's layout): the weights are its state_dict, named without that
// prefix; the config is its hyper_parameters, where an option that is not plain data (here a
// dataclass instance, or Lightning's AttributeDict with its items) is skipped, never constructed.
TEST(TorchCheckpoint, ReadsLightningCheckpoints) {
    const std::string fx = BIOINFER_FIXTURES;
    const io::ModelDir m = io::ModelDir::open(fx + "/boltz2_tiny");
    EXPECT_EQ(m.torch_file(), fx + "/boltz2_tiny/boltz2_conf.ckpt");
    EXPECT_TRUE(m.has("pairformer_module.layers.0.tri_mul_out.p_in.weight"));
    EXPECT_FALSE(m.has("state_dict.pairformer_module.layers.0.tri_mul_out.p_in.weight"));
    EXPECT_EQ(m.get("s_init.weight", {44, 44}).shape(), (Shape{44, 44}));
    ASSERT_TRUE(m.config().is_object());
    EXPECT_EQ(m.config().at("token_s").get<int>(), 44);
    EXPECT_EQ(m.config().at("pairformer_args").at("num_blocks").get<int>(), 2);
    EXPECT_FALSE(m.config().contains("steering_args"));  // a dataclass instance in the file
    // Lightning's AttributeDict among the options: its items are read past and dropped
    const auto attr =
        io::read_torch_checkpoint_full(fx + "/hostile_checkpoints/trainer_attribute_dict.ckpt");
    EXPECT_EQ(attr.data.at("hyper_parameters").at("token_s").get<int>(), 8);
    EXPECT_FALSE(attr.data.at("hyper_parameters").contains("training_args"));
    EXPECT_TRUE(attr.tensors.count("state_dict.embed.weight"));
    const auto direct = io::read_torch_checkpoint_full(fx + "/boltz2_tiny/boltz2_conf.ckpt");
    EXPECT_EQ(direct.data.at("epoch").get<int>(), 0);
    EXPECT_TRUE(direct.tensors.count("state_dict.s_init.weight"));
}

// The load-time scan for damaged weights: the first NaN or Inf of F32, BF16 and F16 tensors,
// past the scan's chunk boundary too; finite extremes and integer tensors pass.
TEST(Io, ErrorMessagesShowRawBytesAsHex) {
    using bioinfer::shown_bytes;
    EXPECT_EQ(shown_bytes("plain ASCII ~!"), "plain ASCII ~!");
    EXPECT_EQ(shown_bytes(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(shown_bytes("line\nbreak\r\ttab\x7f"), "line\\x0abreak\\x0d\\x09tab\\x7f");
    EXPECT_EQ(shown_bytes("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(shown_bytes("\xff\xfe"), "\\xff\\xfe");           // never UTF-8
    EXPECT_EQ(shown_bytes("\xc0\x80"), "\\xc0\\x80");           // overlong NUL
    EXPECT_EQ(shown_bytes("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
    EXPECT_EQ(shown_bytes("\xc2\x85"), "\\xc2\\x85");           // C1 control (NEL)
    EXPECT_EQ(shown_bytes("ab\xe2\x82"), "ab\\xe2\\x82");       // cut short at the end
    EXPECT_EQ(shown_bytes("\xe2(\xa1"), "\\xe2(\\xa1");         // a broken continuation
    // every error message goes through it: one printable line whatever the input held
    const bioinfer::Error e("file\n", std::string("record 'x\x01y' at \xff"));
    EXPECT_STREQ(e.what(), "[file\\x0a] record 'x\\x01y' at \\xff");
}

TEST(Io, AViewOfMisalignedDataIsAnAlignedCopy) {
    // a checkpoint whose storage starts at an odd offset (the torch fuzz target found one)
    alignas(16) char bytes[4 * 3 + 1] = {};
    const float v[3] = {1.5f, -2.0f, 3.25f};
    std::memcpy(bytes + 1, v, sizeof v);
    auto owner = std::make_shared<int>(0);
    const bioinfer::Tensor t =
        bioinfer::Tensor::view_of(bytes + 1, {3}, bioinfer::DType::F32, owner);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 4, 0u);
    EXPECT_NE(t.raw(), static_cast<const void*>(bytes + 1));
    EXPECT_EQ(t.f32()[0], 1.5f);
    EXPECT_EQ(t.f32()[2], 3.25f);
    const bioinfer::Tensor a =
        bioinfer::Tensor::view_of(bytes + 4, {2}, bioinfer::DType::F32, owner);
    EXPECT_EQ(a.raw(), static_cast<const void*>(bytes + 4));  // aligned: still a view
}

TEST(Io, FirstNonFiniteFindsNanAndInfInEveryFloatDtype) {
    const int64_t n = (int64_t(1) << 20) + 77;  // more than one scan chunk
    Tensor f = Tensor::zeros({n});
    f.f32()[n - 3] = std::numeric_limits<float>::max();
    EXPECT_EQ(io::first_nonfinite(f), -1);
    f.f32()[n - 2] = std::numeric_limits<float>::infinity();
    f.f32()[n - 1] = std::nanf("");
    EXPECT_EQ(io::first_nonfinite(f), n - 2);
    for (DType dt : {DType::BF16, DType::F16}) {
        Tensor h = Tensor::zeros({n}, dt);
        auto* u = static_cast<uint16_t*>(h.raw());
        u[100] = dt == DType::BF16 ? 0x7f7f : 0x7bff;  // the largest finite values
        EXPECT_EQ(io::first_nonfinite(h), -1);
        u[n - 5] = dt == DType::BF16 ? 0xffc0 : 0xfe00;  // NaN
        u[n - 1] = dt == DType::BF16 ? 0x7f80 : 0x7c00;  // +Inf
        EXPECT_EQ(io::first_nonfinite(h), n - 5);
    }
    Tensor i = Tensor::of(std::vector<int32_t>{0x7f800000, 0x7fc00000});
    EXPECT_EQ(io::first_nonfinite(i), -1);
    // A model directory refuses such a tensor, naming it, unless allowed.
    io::ModelDir dir = io::ModelDir::from_tensors("mem", nlohmann::json::object(), {{"w", f}});
    try {
        dir.get("w", {n});
        ADD_FAILURE() << "a NaN weight loaded";
    } catch (const Error& e) {
        EXPECT_NE(
            std::string(e.what()).find("tensor 'w' holds a non-finite value (Inf) at flat index " +
                                       std::to_string(n - 2)),
            std::string::npos)
            << e.what();
    }
    io::set_allow_nonfinite(true);
    EXPECT_EQ(dir.get("w", {n}).numel(), n);
    io::set_allow_nonfinite(false);
}
