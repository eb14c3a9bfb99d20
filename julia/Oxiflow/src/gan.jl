# ADCME's generative adversarial networks (ADCME's gan.jl): the `GAN` container, which
# builds the generator and discriminator graphs under their own variable scopes, and its
# loss functions (Jensen-Shannon, KL, reverse KL, least squares, Wasserstein and Wasserstein
# with gradient penalty). Training is the user's: two optimizers on `d_loss` over `d_vars`
# and `g_loss` over `g_vars`, fed batches of `ids` and `noise`.

using Random: randstring

export GAN, jsgan, klgan, wgan, wgan_stable, rklgan, lsgan, sample, predict

"""
    GAN(dat, generator, discriminator, loss="jsgan"; latent_dim=size(dat, 2), batch_size=32)

ADCME's `GAN`: the training data `dat` (`n×d`, an array or a tensor), `generator(z, gan)`
(maps a `batch_size×latent_dim` noise batch to `batch_size×d` samples) and
`discriminator(x, gan)` (maps `batch×d` to `batch` scores), and `loss(gan) -> (d_loss,
g_loss)`: one of [`jsgan`](@ref) (default), [`klgan`](@ref), [`rklgan`](@ref),
[`lsgan`](@ref), [`wgan`](@ref), [`wgan_stable`](@ref), by function or by name. Building it
(`build!`, called here) makes the placeholders `gan.noise` (`batch_size×latent_dim`, the
data's dtype) and `gan.ids` (`batch_size` Int32, 1-based rows of `dat`, so `gan.true_data =
dat[ids, :]`), `gan.fake_data` (the generator's output, built under the variable scope
`generator_<id>`), the losses (under `discriminator_<id>`), and `gan.d_vars`, `gan.g_vars`,
the trainable variables of each scope (`missing` when there are none), and
`gan.update` (`UPDATE_OPS`, or `missing`). `gan.STORAGE` holds `"d_grad_magnitude"` and
`"g_grad_magnitude"` (the gradients' global norms) and, for `wgan_stable`,
`"gradient_penalty"`. An unknown loss name is an `OxiflowError`.
"""
mutable struct GAN
    latent_dim::Int
    batch_size::Int
    dim::Int
    dat::Tensor
    generator::Function
    discriminator::Function
    loss::Function
    d_vars::Any
    g_vars::Any
    d_loss::Any
    g_loss::Any
    is_training::Any
    update::Any
    fake_data::Any
    true_data::Any
    ganid::String
    noise::Any
    ids::Any
    STORAGE::Dict{String,Any}
end

function GAN(dat, generator::Function, discriminator::Function, loss::Union{Missing,Function,AbstractString}=missing;
             latent_dim::Union{Missing,Integer}=missing, batch_size::Integer=32)
    d = convert_to_tensor(dat)
    (ndims(d) == 2 && size(d, 2) !== nothing) || invalid("GAN: dat must be an n×d matrix with d known, got size $(size(d))")
    d.dtype in (Float32, Float64) || invalid("GAN: dat must be Float32 or Float64, got $(d.dtype)")
    batch_size >= 1 || invalid("GAN: batch_size must be positive, got $batch_size")
    lf = loss === missing ? jsgan : loss isa Function ? loss :
         haskey(GAN_LOSSES, loss) ? GAN_LOSSES[loss] : invalid("GAN: loss function $loss not found (known: $(join(sort(collect(keys(GAN_LOSSES))), ", ")))")
    gan = GAN(coalesce(latent_dim, size(d, 2)), Int(batch_size), size(d, 2), d, generator, discriminator, lf,
              missing, missing, missing, missing, options.training.training, missing, missing, missing,
              randstring(), missing, missing, Dict{String,Any}())
    return build!(gan)
end

"""`build!(gan)`: builds the graphs of a [`GAN`](@ref) (the constructor calls it); returns `gan`."""
function build!(gan::GAN)
    gan.noise = placeholder(gan.dat.dtype; shape=[gan.batch_size, gan.latent_dim])
    gan.ids = placeholder(Int32; shape=[gan.batch_size])
    gan.fake_data = variable_scope(() -> gan.generator(gan.noise, gan), "generator_$(gan.ganid)")
    gan.true_data = gan.dat[gan.ids, :]
    gan.d_loss, gan.g_loss = variable_scope(() -> gan.loss(gan), "discriminator_$(gan.ganid)")
    nonempty(v) = isempty(v) ? missing : v
    gan.d_vars = nonempty(get_collection("discriminator_$(gan.ganid)"))
    gan.g_vars = nonempty(get_collection("generator_$(gan.ganid)"))
    gan.update = nonempty(get_collection(UPDATE_OPS))
    gan.d_vars === missing || (gan.STORAGE["d_grad_magnitude"] = gradient_magnitude(gan.d_loss, gan.d_vars))
    gan.g_vars === missing || (gan.STORAGE["g_grad_magnitude"] = gradient_magnitude(gan.g_loss, gan.g_vars))
    return gan
end

function Base.show(io::IO, gan::GAN)
    yes(x) = x === missing ? "✘" : "✔"
    print(io, """
    ( Generative Adversarial Network -- $(gan.ganid) )
        $(gan.latent_dim) D          $(gan.dim) D
    (Latent Space)---->(Data Space)   batch_size = $(gan.batch_size)
    loss function: $(gan.loss)
    d_vars $(yes(gan.d_vars))  g_vars $(yes(gan.g_vars))  d_loss $(yes(gan.d_loss))  g_loss $(yes(gan.g_loss))  update $(yes(gan.update))""")
end

# the discriminator's scores of the true and the generated batches
scores(gan::GAN) = (gan.discriminator(gan.true_data, gan), gan.discriminator(gan.fake_data, gan))

"""`jsgan(gan)`: the original GAN's losses (Jensen-Shannon): `d = -mean(log D(x) + log(1 - D(G(z))))`, `g = -mean(log D(G(z)))` (the discriminator outputs probabilities)."""
function jsgan(gan::GAN)
    Dr, Df = scores(gan)
    return -mean(log(Dr) + log(1 - Df)), -mean(log(Df))
end

"""`klgan(gan)`: the KL-divergence GAN's losses: `d` as [`jsgan`](@ref), `g = mean(log((1 - D(G(z))) / D(G(z))))`."""
function klgan(gan::GAN)
    Dr, Df = scores(gan)
    return -mean(log(Dr) + log(1 - Df)), mean(log((1 - Df) / Df))
end

"""`rklgan(gan)`: the reverse-KL GAN's losses: `d = -mean(log D(G(z)) + log(1 - D(x)))`, `g` as [`klgan`](@ref)."""
function rklgan(gan::GAN)
    Dr, Df = scores(gan)
    return -mean(log(Df) + log(1 - Dr)), mean(log((1 - Df) / Df))
end

"""`lsgan(gan)`: the least-squares GAN's losses: `d = mean((D(x) - 1)² + D(G(z))²)`, `g = mean((D(G(z)) - 1)²)`."""
function lsgan(gan::GAN)
    Dr, Df = scores(gan)
    return mean((Dr - 1)^2 + Df^2), mean((Df - 1)^2)
end

"""`wgan(gan)`: the Wasserstein GAN's losses (the discriminator is a critic): `d = mean(D(G(z))) - mean(D(x))`, `g = -mean(D(G(z)))`."""
function wgan(gan::GAN)
    Dr, Df = scores(gan)
    return mean(Df) - mean(Dr), -mean(Df)
end

"""
    wgan_stable(gan, λ=1.0)

The Wasserstein GAN with gradient penalty (Gulrajani et al. 2017), ADCME's `wgan_stable`:
`d = mean(D(G(z))) - mean(D(x)) + λ mean((‖∇D(x̂)‖ - 1)²)` at `x̂ = x + α (G(z) - x)`, `α`
uniform in `[0, 1)` per batch row (one `RandomUniform`), and `g = -mean(D(G(z)))`. Needs
the discriminator's second derivatives. Stores `mean(‖∇D(x̂)‖)` as
`gan.STORAGE["gradient_penalty"]`, as ADCME does. Data and scores must be matrices and
vectors (an `OxiflowError` otherwise).
"""
function wgan_stable(gan::GAN, λ::Real=1.0)
    real_data, fake_data = gan.true_data, gan.fake_data
    ndims(real_data) == 2 && ndims(fake_data) == 2 || invalid("wgan_stable: the true and generated data must be matrices, got sizes $(size(real_data)) and $(size(fake_data))")
    Dr, Df = scores(gan)
    α = uniform(gan.batch_size, 1; dtype=real_data.dtype)
    interpolates = real_data + α .* (fake_data - real_data)
    d_inter = gan.discriminator(interpolates, gan)
    ndims(d_inter) == 1 || invalid("wgan_stable: the discriminator must return a vector of scores, got size $(size(d_inter))")
    g = gradients(sum(d_inter), interpolates)         # tf.gradients sums the scores
    slopes = sqrt(sum(g .^ 2; dims=2))
    gan.STORAGE["gradient_penalty"] = mean(slopes)
    return mean(Df) - mean(Dr) + λ * mean((slopes - 1) .^ 2), -mean(Df)
end

# the loss functions by ADCME's names (GAN's `loss` argument as a string)
const GAN_LOSSES = Dict("jsgan" => jsgan, "klgan" => klgan, "wgan" => wgan, "wgan_stable" => wgan_stable,
                        "rklgan" => rklgan, "lsgan" => lsgan)

"""
    sample(gan, n), rand(gan, n), rand(gan)

ADCME's `sample`: `n` generated samples (`n×d`) from standard normal latent vectors drawn in
Julia (`randn`), through the generator under its scope (so it reuses the trained variables).
`rand(gan)` is one sample as a vector.
"""
function sample(gan::GAN, n::Integer)
    noise = constant(randn(n, gan.latent_dim); dtype=gan.dat.dtype)
    return variable_scope(() -> gan.generator(noise, gan), "generator_$(gan.ganid)")
end
Base.rand(gan::GAN) = squeeze(sample(gan, 1); dims=1)
Base.rand(gan::GAN, n::Integer) = sample(gan, n)

"""
    predict(gan, input)

ADCME's `predict`: the generator's output for the latent vectors `input` (a
`k×latent_dim` matrix, or one vector, whose result is then a vector), under the generator's
scope.
"""
function predict(gan::GAN, input)
    vec_in = ndims(input) == 1
    x = convert_to_tensor(vec_in ? reshape(input, 1, :) : input)
    x.dtype == gan.dat.dtype || (x = cast(x, gan.dat.dtype))
    out = variable_scope(() -> gan.generator(x, gan), "generator_$(gan.ganid)")
    return vec_in ? squeeze(out) : out
end
