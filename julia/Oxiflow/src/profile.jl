# Reading profiles: the summary table, the HTML timeline, the graph as Graphviz.

export profile_summary, save_graph

"""
    profile_summary(; io=stdout)

Prints a summary of the last `run_profile` step as aligned tables: per device the number of
kernels, busy time (time at least one kernel ran), idle time (the step's span minus busy
time), busy %, copies into the device with their bytes and time, and peak memory (`-` when
not recorded); then the 10 longest kernels. Times in ms. The figures are computed from the
same timeline JSON that `save_profile` writes. Errors when no profile was recorded.
"""
function profile_summary(; io::IO=stdout)
    print(io, oxf_timeline_summary(last_profile().json))
    return nothing
end

"""
    save_graph(path; sess=last session)

Writes the graph of `sess` as Graphviz DOT: one cluster per device with the nodes the
session placed there, nodes coloured by device (grey and dashed: not placed by any run yet),
cross-device edges (where a copy happens) dashed red with the bytes copied, control edges
dotted. With a `.svg` (or `.png`, `.pdf`) path the DOT is rendered by Graphviz's `dot`
program when it is installed; otherwise the `.dot` file is written next to it and a
warning says so. Returns the path written.
"""
function save_graph(path::AbstractString; sess=LAST_SESSION[])
    sess isa Session || invalid("save_graph: no session; create one with Session() or pass sess=")
    dot = oxf_session_graph_dot(sess)
    ext = lowercase(splitext(path)[2])
    if ext in (".svg", ".png", ".pdf")
        exe = Sys.which("dot")
        if exe === nothing
            alt = splitext(path)[1] * ".dot"
            write(alt, dot)
            @warn "save_graph: Graphviz's `dot` program is not installed (Debian: apt-get install graphviz); wrote $alt instead of $path"
            return alt
        end
        # call it as `dot`: Sys.which resolves symlinks, and Graphviz picks its layout engine
        # from the name it was called by (Debian's /usr/bin/dot is a symlink)
        open(`dot -T$(ext[2:end]) -o $path`, "w", stdout) do p
            write(p, dot)
        end
        return path
    end
    write(path, dot)
    return path
end
