// torch.save zip archives: a stored-only zip reader (with zip64) and a restricted unpickler.
#include "io/torch_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "bioinfer/error.h"
#include "io/zip.h"

namespace bioinfer::io {
namespace {

// ---- restricted unpickler ----

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct StorageRef {
    DType dtype;
    std::string key;
    int64_t numel = 0;
};

struct TensorRef {
    StorageRef storage;
    int64_t offset = 0;
    Shape shape, stride;
};

struct Global {
    std::string module, name;
};

struct Mark {};

// A bytes object (BINBYTES and friends) and an RDKit molecule rebuilt from one: only the
// rdkit-molecule entry point accepts them, and the molecule stays its RDKit binary bytes.
struct Bytes {
    std::string data;
};
struct RdkitMolBytes {
    std::string data;
};

// An object of a class the reader will not construct (a dataclass or config object among a
// Lightning checkpoint's hyper-parameters): what it was, nothing of its state. Only allowed where
// the checkpoint keeps options, never among the weights (checked after reading).
struct Opaque {
    std::string module, name;
};

struct Value {
    using List = std::vector<ValuePtr>;
    using Dict = std::vector<std::pair<ValuePtr, ValuePtr>>;  // insertion order
    struct Tuple {
        List items;
    };
    std::variant<std::monostate, bool, int64_t, double, std::string, Tuple, List, Dict, Global,
                 StorageRef, TensorRef, Mark, Opaque, Bytes, RdkitMolBytes>
        v;
};

ValuePtr make(auto x) {
    auto p = std::make_shared<Value>();
    p->v = std::move(x);
    return p;
}

// The only callables a state dict needs; everything else is refused.
bool allowed_global(const std::string& module, const std::string& name) {
    if (module == "collections" && name == "OrderedDict") return true;
    if (module == "torch._utils" && (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter"))
        return true;
    if (module == "torch" && (name == "FloatStorage" || name == "BFloat16Storage" ||
                              name == "HalfStorage" || name == "DoubleStorage" ||
                              name == "LongStorage" || name == "IntStorage" ||
                              name == "BoolStorage" || name == "ByteStorage"))
        return true;
    return false;
}

// What a pickle may call: a tensor state dict's rebuild functions, or (for boltz's molecule
// cache) rdkit.Chem.rdchem.Mol and nothing else.
enum class Allow { StateDict, RdkitMol };

class Unpickler {
public:
    Unpickler(const std::string& where, const uint8_t* p, size_t n, Allow allow = Allow::StateDict)
        : where_(where), p_(p), end_(p + n), allow_(allow) {}

    ValuePtr run() {
        while (true) {
            const uint8_t op = byte();
            switch (op) {
                case 0x80: byte(); break;             // PROTO
                case 0x95: take(8); break;            // FRAME
                case '.': {                           // STOP
                    BI_CHECK(stack_.size() == 1, where_, "pickle ends with ", stack_.size(), " values");
                    return stack_.back();
                }
                case '(': stack_.push_back(make(Mark{})); break;
                case '}': stack_.push_back(make(Value::Dict{})); break;
                case ']': stack_.push_back(make(Value::List{})); break;
                case ')': stack_.push_back(make(Value::Tuple{})); break;
                case 'N': stack_.push_back(make(std::monostate{})); break;
                case 0x88: stack_.push_back(make(true)); break;
                case 0x89: stack_.push_back(make(false)); break;
                case 'K': stack_.push_back(make(int64_t(byte()))); break;
                case 'M': stack_.push_back(make(int64_t(load_le<uint16_t>(take(2))))); break;
                case 'J': stack_.push_back(make(int64_t(load_le<int32_t>(take(4))))); break;
                case 0x8a: {  // LONG1: little-endian two's complement, n <= 8 bytes
                    const uint8_t len = byte();
                    BI_CHECK(len <= 8, where_, "pickle integer of ", int(len), " bytes is too large");
                    const uint8_t* b = take(len);
                    uint64_t u = 0;
                    for (int i = 0; i < len; ++i) u |= uint64_t(b[i]) << (8 * i);
                    if (len > 0 && len < 8 && (b[len - 1] & 0x80)) u |= ~uint64_t(0) << (8 * len);
                    stack_.push_back(make(int64_t(u)));
                    break;
                }
                case 'G': {  // BINFLOAT, big-endian
                    const uint8_t* b = take(8);
                    uint64_t u = 0;
                    for (int i = 0; i < 8; ++i) u = u << 8 | b[i];
                    double d;
                    std::memcpy(&d, &u, 8);
                    stack_.push_back(make(d));
                    break;
                }
                case 'X':
                    stack_.push_back(make(text(load_le<uint32_t>(take(4)))));
                    break;
                case 0x8c:
                    stack_.push_back(make(text(byte())));
                    break;
                case 0x8d:
                    stack_.push_back(make(text(load_le<uint64_t>(take(8)))));
                    break;
                case 'q': memo(byte()); break;
                case 'r': memo(load_le<uint32_t>(take(4))); break;
                case 0x94: memo(memo_.size()); break;
                case 'h': get(byte()); break;
                case 'j': get(load_le<uint32_t>(take(4))); break;
                case 'c': {  // GLOBAL "module\nname\n"
                    const std::string module = line(), name = line();
                    push_global(module, name);
                    break;
                }
                case 0x93: {  // STACK_GLOBAL
                    const std::string name = as_str(pop()), module = as_str(pop());
                    push_global(module, name);
                    break;
                }
                case 't': stack_.push_back(make(Value::Tuple{pop_mark()})); break;
                case 0x85: stack_.push_back(make(Value::Tuple{pop_n(1)})); break;
                case 0x86: stack_.push_back(make(Value::Tuple{pop_n(2)})); break;
                case 0x87: stack_.push_back(make(Value::Tuple{pop_n(3)})); break;
                case 'l': stack_.push_back(make(pop_mark())); break;
                // A dict or list subclass the reader did not construct (Lightning's AttributeDict
                // among a checkpoint's options) takes its items and stays opaque: they are dropped.
                case 'a': {
                    ValuePtr x = pop();
                    if (is_opaque(top())) break;
                    as<Value::List>(top(), "APPEND").push_back(x);
                    break;
                }
                case 'e': {
                    auto items = pop_mark();
                    if (is_opaque(top())) break;
                    auto& l = as<Value::List>(top(), "APPENDS");
                    l.insert(l.end(), items.begin(), items.end());
                    break;
                }
                case 'd': {
                    auto items = pop_mark();
                    Value::Dict d;
                    for (size_t i = 0; i + 1 < items.size(); i += 2) d.emplace_back(items[i], items[i + 1]);
                    stack_.push_back(make(std::move(d)));
                    break;
                }
                case 's': {
                    ValuePtr v = pop(), k = pop();
                    if (is_opaque(top())) break;
                    as<Value::Dict>(top(), "SETITEM").emplace_back(k, v);
                    break;
                }
                case 'u': {
                    auto items = pop_mark();
                    if (is_opaque(top())) break;
                    auto& d = as<Value::Dict>(top(), "SETITEMS");
                    for (size_t i = 0; i + 1 < items.size(); i += 2) d.emplace_back(items[i], items[i + 1]);
                    break;
                }
                case 'Q': {  // BINPERSID: ('storage', StorageType, key, location, numel)
                    ValuePtr pid = pop();
                    stack_.push_back(make(storage_from(pid)));
                    break;
                }
                case 'R': {  // REDUCE: only the allowed callables; an opaque class stays opaque
                    ValuePtr args = pop(), fn = pop();
                    stack_.push_back(is_opaque(fn) ? fn : reduce(fn, args));
                    break;
                }
                case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), only of an opaque class
                    pop();
                    ValuePtr cls = pop();
                    BI_CHECK(is_opaque(cls), where_, "pickle NEWOBJ on a tensor-rebuild callable");
                    stack_.push_back(cls);
                    break;
                }
                case 'b': {  // BUILD: an OrderedDict's _metadata or an opaque object's state: dropped
                    pop();       // (an RDKit molecule's state is its Python __dict__: dropped too)
                    BI_CHECK(std::holds_alternative<Value::Dict>(top()->v) || is_opaque(top()) ||
                                 std::holds_alternative<RdkitMolBytes>(top()->v),
                             where_, "pickle BUILD on something other than a dict");
                    break;
                }
                case 0x8f: stack_.push_back(make(Value::List{})); break;  // EMPTY_SET, as a list
                case 0x90: {                                              // ADDITEMS
                    auto items = pop_mark();
                    auto& l = as<Value::List>(top(), "ADDITEMS");
                    l.insert(l.end(), items.begin(), items.end());
                    break;
                }
                case 'C': stack_.push_back(make(Bytes{str(byte())})); break;  // SHORT_BINBYTES
                case 'B': stack_.push_back(make(Bytes{str(load_le<uint32_t>(take(4)))})); break;
                case 0x8e: stack_.push_back(make(Bytes{str(load_le<uint64_t>(take(8)))})); break;  // BINBYTES8
                default:
                    fail(where_, cat("pickle opcode 0x", std::hex, int(op),
                                     " is not part of a tensor state dict; refusing to read further"));
            }
        }
    }

private:
    std::string where_;
    const uint8_t* p_;
    const uint8_t* end_;
    std::vector<ValuePtr> stack_;
    // keyed, not indexed: a pickle may name any 32-bit slot (MEMOIZE takes the count, as Python's)
    std::unordered_map<size_t, ValuePtr> memo_;
    Allow allow_;

    uint8_t byte() { return *take(1); }
    const uint8_t* take(size_t n) {
        BI_CHECK(size_t(end_ - p_) >= n, where_, "pickle is truncated");
        const uint8_t* r = p_;
        p_ += n;
        return r;
    }
    std::string str(uint64_t n) {
        const uint8_t* b = take(n);
        return std::string(reinterpret_cast<const char*>(b), n);
    }
    // a pickled str (Python refuses one that is not UTF-8 as well)
    std::string text(uint64_t n) {
        std::string s = str(n);
        BI_CHECK(is_utf8(s), where_, "pickle string is not UTF-8");
        return s;
    }
    std::string line() {
        const uint8_t* s = p_;
        while (p_ < end_ && *p_ != '\n') ++p_;
        BI_CHECK(p_ < end_, where_, "pickle is truncated");
        std::string r(reinterpret_cast<const char*>(s), size_t(p_ - s));
        ++p_;
        return r;
    }
    ValuePtr pop() {
        BI_CHECK(!stack_.empty(), where_, "pickle stack underflow");
        ValuePtr v = stack_.back();
        stack_.pop_back();
        BI_CHECK(!std::holds_alternative<Mark>(v->v), where_, "pickle pops a MARK");
        return v;
    }
    ValuePtr& top() {
        BI_CHECK(!stack_.empty(), where_, "pickle stack underflow");
        return stack_.back();
    }
    std::vector<ValuePtr> pop_n(size_t n) {
        std::vector<ValuePtr> r(n);
        for (size_t i = n; i-- > 0;) r[i] = pop();
        return r;
    }
    std::vector<ValuePtr> pop_mark() {
        std::vector<ValuePtr> r;
        while (true) {
            BI_CHECK(!stack_.empty(), where_, "pickle MARK missing");
            ValuePtr v = stack_.back();
            stack_.pop_back();
            if (std::holds_alternative<Mark>(v->v)) break;
            r.push_back(v);
        }
        return {r.rbegin(), r.rend()};
    }
    void memo(size_t i) { memo_[i] = top(); }
    void get(size_t i) {
        const auto it = memo_.find(i);
        BI_CHECK(it != memo_.end() && it->second, where_, "pickle memo ", i, " is empty");
        stack_.push_back(it->second);
    }
    template <typename T>
    T& as(ValuePtr& v, const char* what) {
        T* t = std::get_if<T>(&v->v);
        BI_CHECK(t, where_, "pickle ", what, " applied to the wrong kind of value");
        return *t;
    }
    std::string as_str(const ValuePtr& v) {
        const auto* s = std::get_if<std::string>(&v->v);
        BI_CHECK(s, where_, "pickle expected a string");
        return *s;
    }
    int64_t as_int(const ValuePtr& v) {
        const auto* i = std::get_if<int64_t>(&v->v);
        BI_CHECK(i, where_, "pickle expected an integer");
        return *i;
    }
    Shape as_ints(const ValuePtr& v) {
        const auto* t = std::get_if<Value::Tuple>(&v->v);
        BI_CHECK(t, where_, "pickle expected a tuple of integers");
        Shape s;
        for (auto& x : t->items) s.push_back(as_int(x));
        return s;
    }
    // A global outside the tensor-rebuild set is never resolved: it stands for an opaque object,
    // and where one may appear is checked once the whole pickle is read.
    void push_global(const std::string& module, const std::string& name) {
        if (allow_ == Allow::RdkitMol) {  // nothing opaque here: refused at once
            BI_CHECK(module == "rdkit.Chem.rdchem" && name == "Mol", where_,
                     "refusing to load: the pickle calls '", module, ".", name,
                     "', and only rdkit.Chem.rdchem.Mol is allowed (this file is not a plain RDKit ",
                     "molecule, or it is hostile)");
            stack_.push_back(make(Global{module, name}));
            return;
        }
        if (allowed_global(module, name))
            stack_.push_back(make(Global{module, name}));
        else
            stack_.push_back(make(Opaque{module, name}));
    }
    static bool is_opaque(const ValuePtr& v) { return std::holds_alternative<Opaque>(v->v); }
    StorageRef storage_from(const ValuePtr& pid) {
        const auto* t = std::get_if<Value::Tuple>(&pid->v);
        BI_CHECK(t && t->items.size() == 5 && as_str(t->items[0]) == "storage", where_,
                 "unexpected persistent id (expected a torch storage)");
        const auto* g = std::get_if<Global>(&t->items[1]->v);
        BI_CHECK(g, where_, "storage type is not a torch storage class");
        StorageRef s;
        if (g->name == "FloatStorage") s.dtype = DType::F32;
        else if (g->name == "BFloat16Storage") s.dtype = DType::BF16;
        else if (g->name == "HalfStorage") s.dtype = DType::F16;
        else fail(where_, cat("storage '", g->name, "' holds a dtype the engine does not read ",
                              "(F32, BF16, F16)"));
        s.key = as_str(t->items[2]);
        s.numel = as_int(t->items[4]);
        return s;
    }
    ValuePtr reduce(const ValuePtr& fn, const ValuePtr& args) {
        const auto* g = std::get_if<Global>(&fn->v);
        BI_CHECK(g, where_, "pickle REDUCE on something that is not an allowed callable");
        const auto* a = std::get_if<Value::Tuple>(&args->v);
        BI_CHECK(a, where_, "pickle REDUCE arguments are not a tuple");
        if (allow_ == Allow::RdkitMol) {  // Mol(pickle_bytes): kept as the bytes, never built
            BI_CHECK(a->items.size() == 1 && std::holds_alternative<Bytes>(a->items[0]->v), where_,
                     "rdkit.Chem.rdchem.Mol is called with ", a->items.size(),
                     " arguments; expected its binary pickle bytes alone");
            return make(RdkitMolBytes{std::get<Bytes>(a->items[0]->v).data});
        }
        if (g->name == "OrderedDict") return make(Value::Dict{});
        if (g->name == "_rebuild_parameter") {
            BI_CHECK(!a->items.empty(), where_, "_rebuild_parameter without data");
            return a->items[0];
        }
        BI_CHECK(g->name == "_rebuild_tensor_v2" && a->items.size() >= 4, where_,
                 "'", g->module, ".", g->name, "' cannot be called here");
        const auto* s = std::get_if<StorageRef>(&a->items[0]->v);
        BI_CHECK(s, where_, "_rebuild_tensor_v2 without a storage");
        TensorRef t;
        t.storage = *s;
        t.offset = as_int(a->items[1]);
        t.shape = as_ints(a->items[2]);
        t.stride = as_ints(a->items[3]);
        return make(t);
    }
};

}  // namespace

// Objects the reader did not construct may sit only among a trainer checkpoint's options: the
// root is a dict holding `state_dict`, and the object lies outside it. Anywhere else (a bare
// state dict, the weights themselves, the root) the file is refused, naming the callable.
static void check_opaque_placement(const std::string& path, const ValuePtr& root) {
    const auto* rd = std::get_if<Value::Dict>(&root->v);
    bool trainer = false;
    if (rd)
        for (auto& [k, v] : *rd)
            if (const auto* ks = std::get_if<std::string>(&k->v); ks && *ks == "state_dict") trainer = true;
    std::function<void(const ValuePtr&, bool)> visit = [&](const ValuePtr& v, bool allowed) {
        if (const auto* o = std::get_if<Opaque>(&v->v)) {
            BI_CHECK(allowed, path, "refusing to load: the pickle calls '", o->module, ".", o->name,
                     "', and only tensor-rebuild calls are allowed (this file is not a plain ",
                     "state dict, or it is hostile)");
            return;
        }
        if (const auto* d = std::get_if<Value::Dict>(&v->v)) {
            for (auto& [k, x] : *d) {
                visit(k, allowed);
                visit(x, allowed);
            }
        } else if (const auto* l = std::get_if<Value::List>(&v->v)) {
            for (auto& x : *l) visit(x, allowed);
        } else if (const auto* t = std::get_if<Value::Tuple>(&v->v)) {
            for (auto& x : t->items) visit(x, allowed);
        }
    };
    if (!trainer) {
        visit(root, false);
        return;
    }
    for (auto& [k, v] : *rd) {
        const auto* ks = std::get_if<std::string>(&k->v);
        visit(v, !(ks && *ks == "state_dict"));
    }
}

// The plain data of a pickle as JSON: dicts (keys as strings), lists and tuples, numbers,
// strings, booleans and None. Tensors and objects the reader did not construct are left out.
static nlohmann::json plain_data(const ValuePtr& v) {
    using nlohmann::json;
    return std::visit(
        [&](const auto& x) -> json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>) return nullptr;
            else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                               std::is_same_v<T, double> || std::is_same_v<T, std::string>)
                return x;
            else if constexpr (std::is_same_v<T, Value::List> || std::is_same_v<T, Value::Tuple>) {
                const Value::List* items;
                if constexpr (std::is_same_v<T, Value::List>) items = &x;
                else items = &x.items;
                json a = json::array();
                for (auto& e : *items)
                    if (!std::holds_alternative<Opaque>(e->v) && !std::holds_alternative<TensorRef>(e->v))
                        a.push_back(plain_data(e));
                return a;
            } else if constexpr (std::is_same_v<T, Value::Dict>) {
                json o = json::object();
                for (auto& [k, e] : x) {
                    if (std::holds_alternative<Opaque>(e->v) || std::holds_alternative<TensorRef>(e->v))
                        continue;
                    std::string key;
                    if (const auto* ks = std::get_if<std::string>(&k->v)) key = *ks;
                    else if (const auto* ki = std::get_if<int64_t>(&k->v)) key = std::to_string(*ki);
                    else continue;
                    o[key] = plain_data(e);
                }
                return o;
            } else {
                return nullptr;
            }
        },
        v->v);
}

TorchCheckpoint read_torch_checkpoint_full(const std::string& path) {
    const auto map = map_file(path);
    const uint8_t* base = map->data;
    const auto entries = read_zip_directory(path, base, map->size, "a torch checkpoint",
                                            "a legacy pre-1.6 torch.save file or a corrupt download");

    // The archive's top folder is the checkpoint's own name: <prefix>/data.pkl, <prefix>/data/<key>.
    std::string prefix;
    for (auto& [name, e] : entries)
        if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0 &&
            name.find('/') == name.size() - 9) {
            prefix = name.substr(0, name.size() - 8);
            break;
        }
    BI_CHECK(entries.count(prefix + "data.pkl"), path, "not a torch checkpoint: no data.pkl");
    const ZipEntry& pkl = entries.at(prefix + "data.pkl");
    BI_CHECK(pkl.method == 0, path, "data.pkl is compressed; torch.save never does that");
    ValuePtr root = Unpickler(path, base + pkl.data_offset, pkl.size).run();
    check_opaque_placement(path, root);

    TorchCheckpoint ck;
    ck.data = plain_data(root);
    std::map<std::string, Tensor>& out = ck.tensors;
    std::shared_ptr<const void> owner = map;
    std::function<void(const ValuePtr&, const std::string&)> walk = [&](const ValuePtr& v,
                                                                         const std::string& name) {
        if (const auto* d = std::get_if<Value::Dict>(&v->v)) {
            for (auto& [k, x] : *d) {
                const auto* ks = std::get_if<std::string>(&k->v);
                BI_CHECK(ks, path, "state dict key is not a string");
                walk(x, name.empty() ? *ks : name + "." + *ks);
            }
            return;
        }
        const auto* t = std::get_if<TensorRef>(&v->v);
        if (!t) return;  // plain values (versions, flags) carry no weights
        const std::string where = cat(path, ": tensor '", name, "'");
        const std::string entry = prefix + "data/" + t->storage.key;
        BI_CHECK(entries.count(entry), where, "storage '", t->storage.key, "' missing from the archive");
        const ZipEntry& e = entries.at(entry);
        BI_CHECK(e.method == 0, where, "storage is compressed");
        const size_t es = dtype_size(t->storage.dtype);
        BI_CHECK(uint64_t(t->storage.numel) * es <= e.size, where, "storage is shorter than declared");
        // Only dense row-major tensors (what state dicts hold).
        int64_t expect = 1;
        for (int i = int(t->shape.size()) - 1; i >= 0; --i) {
            BI_CHECK(t->shape[size_t(i)] <= 1 || t->stride[size_t(i)] == expect, where,
                     "is not contiguous (stride ", shape_str(t->stride), " for shape ", shape_str(t->shape), ")");
            expect *= t->shape[size_t(i)];
        }
        BI_CHECK(t->offset >= 0 && t->offset + shape_numel(t->shape) <= t->storage.numel, where,
                 "lies outside its storage");
        out[name] = Tensor::view_of(base + e.data_offset + uint64_t(t->offset) * es, t->shape,
                                    t->storage.dtype, owner);
    };
    walk(root, "");
    BI_CHECK(!out.empty(), path, "holds no tensors");
    return ck;
}

std::map<std::string, Tensor> read_torch_checkpoint(const std::string& path) {
    return read_torch_checkpoint_full(path).tensors;
}

std::string read_rdkit_mol_pickle(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    BI_CHECK(fd >= 0, path, "cannot open: ", std::strerror(errno));
    std::string buf;
    char chunk[65536];
    for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) != 0;) {
        if (n < 0) {
            ::close(fd);
            fail(path, cat("cannot read: ", std::strerror(errno)));
        }
        buf.append(chunk, size_t(n));
    }
    ::close(fd);
    BI_CHECK(!buf.empty(), path, "is empty; expected a pickled RDKit molecule");
    ValuePtr root = Unpickler(path, reinterpret_cast<const uint8_t*>(buf.data()), buf.size(),
                              Allow::RdkitMol)
                        .run();
    const auto* mol = std::get_if<RdkitMolBytes>(&root->v);
    BI_CHECK(mol, path, "holds no RDKit molecule: expected rdkit.Chem.rdchem.Mol(bytes) at its root");
    return mol->data;
}


}  // namespace bioinfer::io
