# Pkg.build("Oxiflow"): builds the engine (the oxiflow-capi cdylib, release profile) with
# cargo in the repository this package lives in, and records the library's absolute path
# in deps/deps.jl, where `using Oxiflow` reads it. ENV["OXIFLOW_LIB"] still overrides the
# recorded path at load time.
#
# Needs Rust's cargo (on PATH, or rustup's ~/.cargo/bin/cargo). Fails with
# a message naming what is missing; Pkg.build then reports the package as not built.

const REPO = normpath(joinpath(@__DIR__, "..", "..", ".."))
const DEPS_FILE = joinpath(@__DIR__, "deps.jl")
const LIBNAME = Sys.isapple() ? "liboxiflow.dylib" : Sys.iswindows() ? "oxiflow.dll" : "liboxiflow.so"

function find_cargo()
    # by name, not Sys.which's result: that resolves rustup's cargo link to `rustup` itself,
    # which then no longer acts as cargo
    Sys.which("cargo") === nothing || return "cargo"
    home = joinpath(get(ENV, "CARGO_HOME", joinpath(homedir(), ".cargo")), "bin", "cargo")
    isfile(home) && return home
    error("Oxiflow build: cargo (Rust) was not found on PATH or at $home; " *
          "install Rust (https://rustup.rs) and run Pkg.build(\"Oxiflow\") again")
end

# cargo's target directory (CARGO_TARGET_DIR and .cargo/config are honoured), from cargo itself.
function target_dir(cargo)
    meta = read(Cmd(`$cargo metadata --format-version 1 --no-deps`; dir=REPO), String)
    m = match(r"\"target_directory\"\s*:\s*\"((?:[^\"\\]|\\.)*)\"", meta)
    m === nothing && error("Oxiflow build: `cargo metadata` in $REPO did not report a target directory")
    return unescape_string(m.captures[1])
end

function build()
    isfile(joinpath(REPO, "Cargo.toml")) && isdir(joinpath(REPO, "crates", "oxiflow-capi")) ||
        error("Oxiflow build: expected the Oxiflow repository (Cargo.toml, crates/oxiflow-capi) at $REPO; " *
              "develop the package from a clone: Pkg.develop(path=\"<clone>/julia/Oxiflow\")")
    cargo = find_cargo()
    # MPI collectives where OpenMPI's mpicc exists, as `make build` decides
    features = Sys.which("mpicc") === nothing ? String[] : ["--features", "mpi"]
    println("Oxiflow build: $cargo build --release -p oxiflow-capi $(join(features, ' ')) (in $REPO)")
    run(Cmd(`$cargo build --release -p oxiflow-capi $features`; dir=REPO))
    lib = joinpath(target_dir(cargo), "release", LIBNAME)
    isfile(lib) || error("Oxiflow build: cargo finished but $lib does not exist")
    open(DEPS_FILE, "w") do io
        println(io, "# Written by deps/build.jl (Pkg.build(\"Oxiflow\")); not tracked by git.")
        println(io, "const OXIFLOW_BUILT_LIB = ", repr(lib))
    end
    println("Oxiflow build: engine library recorded in $DEPS_FILE: $lib")
end

build()
