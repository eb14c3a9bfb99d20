# What the engine writes to the process's standard error while `f` runs (Julia's
# redirect_stderr moves file descriptor 2, which the library's `Print` kernel writes to).
function captured_stderr(f)
    path = tempname()
    open(path, "w") do io
        redirect_stderr(f, io)
    end
    return read(path, String)
end
