// HDF5 through the C library; intermediate groups are created on demand. No object records its
// creation time, so the same arrays written in the same order give the same bytes.
#include "io/h5.h"

#include <hdf5.h>

#include "bioinfer/error.h"

namespace bioinfer::io {

H5Writer::H5Writer(const std::string& path) : file_(path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);  // the root group
    id_ = H5Fcreate(file_.tmp_path().c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    BI_CHECK(id_ >= 0, path, "cannot create HDF5 file");
}

H5Writer::~H5Writer() {
    if (id_ >= 0) H5Fclose(hid_t(id_));
}

void H5Writer::write(const std::string& path_in_file, const Shape& shape, const float* data) {
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(gcpl, 0);
    H5Pset_obj_track_times(dcpl, 0);
    for (size_t p = path_in_file.find('/', 1); p != std::string::npos; p = path_in_file.find('/', p + 1)) {
        const std::string group = path_in_file.substr(0, p);
        if (H5Lexists(hid_t(id_), group.c_str(), H5P_DEFAULT) <= 0) {
            hid_t g = H5Gcreate2(hid_t(id_), group.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT);
            if (g >= 0) H5Gclose(g);
        }
    }
    hid_t ds = H5Dcreate2(hid_t(id_), path_in_file.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT,
                          dcpl, H5P_DEFAULT);
    herr_t st = ds >= 0 ? H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(gcpl);
    H5Pclose(dcpl);
    H5Sclose(space);
    BI_CHECK(st >= 0, file_.final_path(), "cannot write dataset '", path_in_file, "'");
}

void H5Writer::commit() {
    herr_t st = H5Fclose(hid_t(id_));
    id_ = -1;
    BI_CHECK(st >= 0, file_.final_path(), "closing the HDF5 file failed");
    file_.commit();
}

std::vector<float> h5_read(const std::string& file, const std::string& dataset, Shape* shape) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    BI_CHECK(f >= 0, file, "cannot open HDF5 file");
    hid_t ds = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
    if (ds < 0) {
        H5Fclose(f);
        fail(file, cat("no dataset '", dataset, "'"));
    }
    hid_t space = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(size_t(std::max(nd, 0)));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    Shape s(dims.begin(), dims.end());
    std::vector<float> out(size_t(shape_numel(s)));
    // a damaged file can open and still fail here: merge reads shards through this
    const bool read = nd >= 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0;
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
    BI_CHECK(read, file, "dataset '", dataset, "' cannot be read (a damaged file?)");
    if (shape) *shape = s;
    return out;
}

}  // namespace bioinfer::io
