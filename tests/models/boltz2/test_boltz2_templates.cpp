// Boltz-2 templates: boltz's alignment helpers, template records and their features from mmCIF
// and PDB templates (fixture part `inputs`, made by boltz from the same files), the template
// module against the reference's forward (fixture part `trunk`), and the errors of bad entries.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "boltz2_fixture.h"
#include "io/boltz_inputs.h"
#include "models/boltz2/featurizer.h"
#include "models/boltz2/templates.h"
#include "models/boltz2/trunk.h"
#include "test_util.h"

namespace bioinfer::test {
namespace {
namespace fs = std::filesystem;
using namespace boltz2;

#ifdef BIOINFER_FIXTURES

// boltz's alignment helpers (Biopython's blastp global score and ungapped local alignments) and
// scipy's assignment, on seeded pairs with many ties (make_boltz2_template_fixture.py).
TEST(Boltz2Templates, AlignmentsMatchBiopythonAndScipy) {
    std::ifstream in(boltz2_fixture_dir() + "/template_alignments.tsv");
    ASSERT_TRUE(in.good());
    std::string line;
    std::getline(in, line);  // header
    const auto split = [](const std::string& s, char sep) {
        std::vector<std::string> out;
        std::stringstream ss(s);
        std::string x;
        while (std::getline(ss, x, sep)) out.push_back(x);
        return out;
    };
    int n_global = 0, n_local = 0, n_assign = 0;
    while (std::getline(in, line)) {
        const std::vector<std::string> f = split(line, '\t');
        ASSERT_EQ(f.size(), f[0] == "assign" ? 3u : 4u) << line;
        if (f[0] == "global") {
            EXPECT_EQ(boltz2::blastp_global_score(f[1], f[2], "test"), std::stod(f[3])) << line;
            ++n_global;
        } else if (f[0] == "local") {
            std::string got;
            for (const auto& a : boltz2::ungapped_local_alignments(f[1], f[2], "test"))
                got += (got.empty() ? "" : ",") + std::to_string(a.query_st) + "-" +
                       std::to_string(a.query_en) + "-" + std::to_string(a.template_st) + "-" +
                       std::to_string(a.template_en);
            EXPECT_EQ(got.empty() ? "-" : got, f[3]) << line;
            ++n_local;
        } else {
            std::vector<std::vector<double>> m;
            for (const std::string& row : split(f[1], ';')) {
                m.emplace_back();
                for (const std::string& v : split(row, ',')) m.back().push_back(std::stod(v));
            }
            std::string got;
            for (const auto& [r, c] : boltz2::max_assignment(m))
                got += (got.empty() ? "" : ",") + std::to_string(r) + "-" + std::to_string(c);
            EXPECT_EQ(got, f[2]) << line;
            ++n_assign;
        }
    }
    EXPECT_GT(n_global, 100);
    EXPECT_GT(n_local, 100);
    EXPECT_GT(n_assign, 100);
}

// A PDB-format template goes through boltz's renamed-subchain route (chain A is template chain
// A1): its features equal boltz's.
TEST(Boltz2Templates, PdbTemplateMatchesReference) {
    auto ref = io::SafetensorsFile::open(boltz2_fixture_dir() + "/template_pdb.safetensors");
    FeaturizeOptions opt;
    opt.mols_dir = boltz2_fixture_dir() + "/mols";
    const Featurized got = boltz2::featurize(io::read_boltz_input(boltz2_case_yaml("template_pdb")), opt);
    int compared = 0;
    for (const auto& [k, info] : ref->tensors()) {
        const std::string name = k.substr(5);  // feat.
        ASSERT_TRUE(got.feats.has(name)) << name;
        const Tensor r = ref->get(k).to_f32();
        if (name == "template_force_threshold") {
            EXPECT_TRUE(std::isinf(got.feats.at(name).f32()[0]) && std::isinf(r.f32()[0]));
            continue;
        }
        EXPECT_EQ(max_diff(got.feats.at(name), r), 0.0) << name;
        ++compared;
    }
    EXPECT_EQ(compared, 10);
    EXPECT_GT(ops::max_value(got.feats.at("template_mask")), 0.0f);
}

// The records follow the chains named; a wrong template chain changes the features; bad entries
// name the file, the line and the template.
TEST(Boltz2Templates, TemplatesResolveAndFailCleanly) {
    const Boltz2Case c = load_boltz2_case("template");
    const bio::Target t = io::read_boltz_input(boltz2_case_yaml("template"));
    ASSERT_EQ(t.templates.size(), 2u);
    EXPECT_EQ(t.templates[0].name, "7roa");
    EXPECT_EQ(t.templates[1].name, "9obn");
    EXPECT_TRUE(t.templates[1].template_ids.empty());
    const auto structure = boltz2::read_template_structure(t.templates[1].path, false,
                                                           boltz2::ConformerLibrary::builtin(), "");
    const auto recs = boltz2::template_records(t.templates[1], t, structure);
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].template_chain, "G");  // the nanobody, by global alignment score
    FeaturizeOptions opt;
    opt.augmentation = reference_motions(c);
    opt.mols_dir = boltz2_fixture_dir() + "/mols";
    bio::Target wrong = t;
    wrong.templates[1].template_ids = {"A"};
    const Featurized w = boltz2::featurize(wrong, opt);
    EXPECT_GT(max_diff(w.feats.at("template_restype"), c.feats.at("template_restype")), 0.5);
    bio::Target one = t;
    one.templates.pop_back();
    const Featurized o = boltz2::featurize(one, opt);
    EXPECT_EQ(o.feats.at("template_mask").size(0), 1);

    const auto feat_err = [&](auto edit) {
        bio::Target x = t;
        edit(x);
        return error_of([&] { boltz2::featurize(x, opt); });
    };
    EXPECT_NE(feat_err([](auto& x) {
                  x.templates[0].template_ids = {"Q"};
              }).find("chain Q is not a protein chain of"),
              std::string::npos);
    EXPECT_NE(feat_err([](auto& x) { x.templates[0].path += ".missing"; })
                  .find("7roa.cif.missing does not exist"),
              std::string::npos);
    // a file gemmi cannot parse
    const std::string junk = (fs::temp_directory_path() / "bioinfer_junk_template.cif").string();
    std::ofstream(junk) << "not a cif\n";
    EXPECT_NE(feat_err([&](auto& x) { x.templates[0].path = junk; })
                  .find("cannot read structure: " + junk + ":1:1: expected block header"),
              std::string::npos);
    fs::remove(junk);
    const std::string head =
        "version: 1\nsequences:\n  - protein:\n      id: A\n"
        "      sequence: MKV\n      msa: empty\n  - ligand:\n      id: L\n"
        "      ccd: EOH\ntemplates:\n";
    const auto yaml_err = [&](const std::string& body) {
        return error_of([&] { io::parse_boltz_yaml(head + body, "t.yaml"); });
    };
    for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
             {"  - chain_id: A\n", "missing the structure path"},
             {"  - cif: x.cif\n    chain_id: L\n", "chain L is not one of the protein chains"},
             {"  - cif: x.cif\n    chain_id: [A]\n    template_id: [A, B]\n", "the two must match"},
             {"  - cif: x.cif\n    force: true\n", "needs a `threshold`"},
             {"  - cif: x.cif\n    colour: red\n", "colour"},
         }) {
        const std::string e = yaml_err(body);
        EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
        EXPECT_NE(e.find("t.yaml:"), std::string::npos) << e;
    }
}

// The template module on the case with two templates (7ROA for chain A, 9OBN's nanobody for B,
// chain C untemplated), from each pass's z; its pair features are rebuilt per template.
TEST(Boltz2Templates, TemplateModuleMatchesReference) {
    const Boltz2Case c = load_boltz2_case("template");
    const Trunk& t = boltz2_trunk();
    ASSERT_TRUE(t.templates.defined());
    ASSERT_TRUE(TemplateModule::any_template(c.feats));
    ASSERT_GT(trunk_passes(c), 0);
    for (int p = 0; p < trunk_passes(c); ++p) {
        const std::string pre = "trunk.pass" + std::to_string(p) + ".";
        expect_parity(t.templates.run(c.get0(pre + "z"), c.feats), c.get0(pre + "template_out"),
                      pre + "template_out");
    }
}

// Each template alone, and a wrong visibility rule (every pair visible), move the output off
// the bar: both templates and the group mask reach the result.
TEST(Boltz2Templates, DroppedTemplateOrVisibilityFailsTheBar) {
    const Boltz2Case c = load_boltz2_case("template");
    const Trunk& t = boltz2_trunk();
    const Tensor z = c.get0("trunk.pass0.z"), ref = c.get0("trunk.pass0.template_out");
    const int64_t templates = c.feats.at("template_mask").size(0);
    ASSERT_GT(templates, 1) << "the case needs two templates to drop one";
    for (int64_t drop = 0; drop < templates; ++drop) {
        Features f = c.feats;
        Tensor mask = f.at("template_mask").clone();
        std::fill(mask.f32() + drop * mask.size(1), mask.f32() + (drop + 1) * mask.size(1), 0.0f);
        f.set("template_mask", mask);
        EXPECT_TRUE(fails_bar(t.templates.run(z, f), ref)) << "template " << drop << " dropped";
    }
    Features f = c.feats;
    f.set("visibility_ids", Tensor::zeros(f.at("visibility_ids").shape()));
    EXPECT_TRUE(fails_bar(t.templates.run(z, f), ref));
}

// The whole trunk with templates: every pass's template output and the trunk's result.
TEST(Boltz2Templates, WholeTrunkWithTemplates) {
    const Boltz2Case c = load_boltz2_case("template");
    const Trunk& t = boltz2_trunk();
    std::map<std::string, Tensor> seen;
    const int passes = trunk_passes(c);
    ASSERT_GT(passes, 0);
    const TrunkOutput out =
        t.run(c.feats, c.get0("trunk.s_inputs"), passes - 1,
              [&](const std::string& n, const Tensor& v) { seen[n] = v.clone(); });
    for (int p = 0; p < passes; ++p) {
        const std::string pre = "pass" + std::to_string(p) + ".";
        for (const char* n : {"z", "template_out", "msa_out"})
            expect_parity(seen.at(pre + n), c.get0("trunk." + pre + n), pre + n);
    }
    const std::string last_block = ".pf.block" + std::to_string(t.pairformer.layers.size() - 1) + ".z";
    for (int p : first_and_last_pass(c)) {
        const std::string n = "pass" + std::to_string(p) + last_block;
        expect_parity(seen.at(n), c.get0("trunk." + n), n);
    }
    expect_parity(out.z, c.get0("trunk.z"), "trunk z");
    expect_parity(out.pdistogram, c.get0("trunk.pdistogram"), "pdistogram");
}

#endif  // BIOINFER_FIXTURES

}  // namespace
}  // namespace bioinfer::test
