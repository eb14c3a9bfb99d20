# A small strict JSON reader for tests (Julia's stdlib has none): objects -> Dict, arrays ->
# Vector{Any}, numbers -> Float64, strings (with escapes), true/false/null. Errors on
# malformed input, so "it parses" is a real validity check.
module MiniJSON

function parse_json(s::AbstractString)
    str = String(s)
    v, i = value(str, skipws(str, 1))
    i = skipws(str, i)
    i <= ncodeunits(str) && error("trailing characters at $i")
    return v
end

skipws(s, i) = (while i <= ncodeunits(s) && s[i] in (' ', '\n', '\t', '\r'); i += 1; end; i)

function value(s, i)
    i > ncodeunits(s) && error("unexpected end")
    c = s[i]
    c == '{' && return object(s, i)
    c == '[' && return array(s, i)
    c == '"' && return jstring(s, i)
    startswith(SubString(s, i), "true") && return true, i + 4
    startswith(SubString(s, i), "false") && return false, i + 5
    startswith(SubString(s, i), "null") && return nothing, i + 4
    m = match(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", SubString(s, i))
    m === nothing && error("unexpected character '$c' at $i")
    return parse(Float64, m.match), i + ncodeunits(m.match)
end

function object(s, i)
    d = Dict{String,Any}(); i = skipws(s, i + 1)
    s[i] == '}' && return d, i + 1
    while true
        s[i] == '"' || error("expected a key at $i")
        k, i = jstring(s, i); i = skipws(s, i)
        s[i] == ':' || error("expected ':' at $i")
        v, i = value(s, skipws(s, i + 1)); d[k] = v; i = skipws(s, i)
        s[i] == '}' && return d, i + 1
        s[i] == ',' || error("expected ',' or '}' at $i")
        i = skipws(s, i + 1)
    end
end

function array(s, i)
    a = Any[]; i = skipws(s, i + 1)
    s[i] == ']' && return a, i + 1
    while true
        v, i = value(s, i); push!(a, v); i = skipws(s, i)
        s[i] == ']' && return a, i + 1
        s[i] == ',' || error("expected ',' or ']' at $i")
        i = skipws(s, i + 1)
    end
end

function jstring(s, i)
    io = IOBuffer(); i += 1
    while true
        c = s[i]
        if c == '"'
            return String(take!(io)), i + 1
        elseif c == '\\'
            e = s[i+1]
            if e == 'u'
                write(io, Char(parse(UInt16, s[i+2:i+5]; base=16))); i += 6; continue
            end
            write(io, Dict('"' => '"', '\\' => '\\', '/' => '/', 'b' => '\b', 'f' => '\f', 'n' => '\n', 'r' => '\r', 't' => '\t')[e])
            i += 2
        else
            write(io, c); i = nextind(s, i)
        end
    end
end

end
