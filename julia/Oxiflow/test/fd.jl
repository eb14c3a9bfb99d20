# Central finite differences, the oracle of every gradient test in this suite.

"""`fd_grad(f, X; h)`: the gradient of scalar `f` at the array `X`, entry by entry."""
function fd_grad(f, X; h=1e-6)
    G = zeros(size(X))
    for i in eachindex(X)
        E = zeros(size(X)); E[i] = h
        G[i] = (f(X + E) - f(X - E)) / 2h
    end
    return G
end

"""`fd_jacobian(f, x; h)`: the Jacobian of `f: R^n -> R^m` (or `R`) at the vector `x`, m×n."""
function fd_jacobian(f, x; h=1e-5)
    cols = [(f(x + h * ((1:length(x)) .== j)) - f(x - h * ((1:length(x)) .== j))) / 2h for j in 1:length(x)]
    return hcat([vcat(c...) for c in cols]...)
end
fd_gradient(f, x) = vec(fd_jacobian(f, x))
