# Every `show` of the package, one line each.

function Base.show(io::IO, t::Tensor)
    g = getfield(t, :graph)
    if g.ptr == C_NULL
        return print(io, "Tensor(<freed graph>)")
    end
    n = getfield(t, :node)
    if oxf_node_num_outputs(g, n) == 0
        print(io, "Operation(\"", t.name, "\", type=", oxf_node_op(g, n))
    else
        print(io, "Tensor(\"", t.name, "\", shape=", t.shape, ", dtype=", t.dtype)
    end
    d = t.device
    isempty(d) || print(io, ", device=\"", d, "\"")
    print(io, ")")
end

Base.show(io::IO, o::Operation) = print(io, "Operation(\"", o.name, "\", type=", o.type, isempty(o.device) ? "" : ", device=\"$(o.device)\"", ")")
Base.show(io::IO, s::Session) = print(io, "Session(", s.ptr == C_NULL ? "freed" : join((d.name for d in list_devices_of(s)), ", "), ")")
Base.show(io::IO, n::NodeDef) = print(io, "NodeDef(name=\"", n.name, "\", op=\"", n.op, "\", device=\"", n.device, "\")")
Base.show(io::IO, ::TFModule) = print(io, "tf (Oxiflow's TensorFlow-compatible shim)")

function Base.show(io::IO, s::SparseTensor)
    if getfield(s.values, :graph).ptr == C_NULL
        return print(io, "SparseTensor(", s.m, ", ", s.n, ", <freed graph>)")
    end
    k = nnz(s)
    print(io, "SparseTensor(", s.m, ", ", s.n, ", nnz=", k === nothing ? "?" : k, ", ", eltype(s), ")")
end
Base.show(io::IO, F::SparseFactorization) =
    print(io, "SparseFactorization(", F.method, F.adjoint ? ", adjoint" : "", ", ", F.A, ")")
Base.show(io::IO, ::MIME"text/plain", F::SparseFactorization) = show(io, F)

list_devices_of(s::Session) = oxf_session_devices(s)
