// The biological data layer: the residue vocabulary (boltz's tokens and one-letter maps as
// boltz.data.const has them, the amino acids in AlphaFold's order, the letters written for
// residue names), the molecule types and chain naming.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "bio/molecule.h"
#include "bio/residues.h"
#include "bio/target.h"

using namespace bioinfer;

namespace {

// A polymer type's alphabet, letter -> residue, over every character.
std::map<char, std::string> letters_of(bio::MoleculeType t) {
    std::map<char, std::string> m;
    for (int c = 1; c < 128; ++c)
        if (const char* r = bio::residue_of_letter(t, char(c))) m[char(c)] = r;
    return m;
}

}  // namespace

TEST(BioResidues, TokensAreBoltzsInItsOrder) {
    const std::vector<std::string> boltz = {
        "<pad>", "-",   "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS",
        "ILE",   "LEU", "LYS", "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL",
        "UNK",   "A",   "G",   "C",   "U",   "N",   "DA",  "DG",  "DC",  "DT",  "DN"};
    ASSERT_EQ(bio::kNumResidueTokens, int(boltz.size()));
    for (int i = 0; i < bio::kNumResidueTokens; ++i) {
        EXPECT_EQ(bio::kResidueTokens[i], boltz[size_t(i)]);
        EXPECT_EQ(bio::residue_token(boltz[size_t(i)]), i);
    }
    EXPECT_EQ(bio::residue_token("MSE"), -1);
    EXPECT_EQ(bio::residue_token("LIG1"), -1);
}

TEST(BioResidues, OneLetterMapsAreBoltzs) {
    using T = bio::MoleculeType;
    EXPECT_EQ(
        letters_of(T::Protein),
        (std::map<char, std::string>{
            {'A', "ALA"}, {'R', "ARG"}, {'N', "ASN"}, {'D', "ASP"}, {'C', "CYS"}, {'E', "GLU"},
            {'Q', "GLN"}, {'G', "GLY"}, {'H', "HIS"}, {'I', "ILE"}, {'L', "LEU"}, {'K', "LYS"},
            {'M', "MET"}, {'F', "PHE"}, {'P', "PRO"}, {'S', "SER"}, {'T', "THR"}, {'W', "TRP"},
            {'Y', "TYR"}, {'V', "VAL"}, {'X', "UNK"}, {'J', "UNK"}, {'B', "UNK"}, {'Z', "UNK"},
            {'O', "UNK"}, {'U', "UNK"}, {'-', "-"}}));
    EXPECT_EQ(letters_of(T::Rna), (std::map<char, std::string>{
                                      {'A', "A"}, {'G', "G"}, {'C', "C"}, {'U', "U"}, {'N', "N"}}));
    EXPECT_EQ(letters_of(T::Dna),
              (std::map<char, std::string>{
                  {'A', "DA"}, {'G', "DG"}, {'C', "DC"}, {'T', "DT"}, {'N', "DN"}}));
    EXPECT_TRUE(letters_of(T::Ligand).empty());
    EXPECT_STREQ(bio::unknown_residue(T::Protein), "UNK");
    EXPECT_STREQ(bio::unknown_residue(T::Dna), "DN");
    EXPECT_STREQ(bio::unknown_residue(T::Rna), "N");
    EXPECT_EQ(bio::unknown_residue(T::Ligand), nullptr);
}

TEST(BioResidues, AminoAcidsInAlphaFoldOrder) {
    EXPECT_STREQ(bio::kAminoAcidLetters, "ARNDCQEGHILKMFPSTWYV");
    for (int r = 0; r < bio::kNumAminoAcids; ++r) {
        EXPECT_EQ(bio::amino_acid_index(bio::kAminoAcidLetters[r]), r);
        EXPECT_STREQ(bio::residue_of_letter(bio::MoleculeType::Protein, bio::kAminoAcidLetters[r]),
                     bio::kAminoAcidNames[r]);
    }
    EXPECT_STREQ(bio::kAminoAcidNames[bio::kNumAminoAcids], "UNK");
    EXPECT_EQ(bio::amino_acid_index('X'), bio::kNumAminoAcids);
    EXPECT_EQ(bio::amino_acid_index('a'), bio::kNumAminoAcids);
}

TEST(BioResidues, LettersOfResidueNames) {
    EXPECT_EQ(bio::residue_letter("TRP"), 'W');
    EXPECT_EQ(bio::residue_letter("UNK"), 'X');
    EXPECT_EQ(bio::residue_letter("U"), 'U');
    EXPECT_EQ(bio::residue_letter("DT"), 'T');
    EXPECT_EQ(bio::residue_letter("DN"), 'N');
    EXPECT_EQ(bio::residue_letter("MSE"), 'X');
    EXPECT_EQ(bio::residue_letter("LIG1"), 'X');
}

TEST(BioTarget, MoleculeTypesAndChainIds) {
    EXPECT_STREQ(bio::molecule_type_name(bio::MoleculeType::Protein), "protein");
    EXPECT_STREQ(bio::molecule_type_name(bio::MoleculeType::Ligand), "ligand");
    EXPECT_EQ(int(bio::MoleculeType::Rna), 2);  // boltz's chain_type_ids
    EXPECT_TRUE(bio::is_polymer(bio::MoleculeType::Dna));
    EXPECT_FALSE(bio::is_polymer(bio::MoleculeType::Ligand));
    EXPECT_EQ(bio::chain_id(0), "A");
    EXPECT_EQ(bio::chain_id(26), "a");
    EXPECT_EQ(bio::chain_id(61), "9");
    EXPECT_EQ(bio::chain_id(62), "AA");
    EXPECT_EQ(bio::chain_id(63), "AB");
}
