"""The stretch's training model (fused attention, dropout) against the reference TinyGPT, and how the stretch
picks its GPU path: these run on the CPU, so CI proves what a GPU run relies on."""

import pytest
import torch
import torch.nn.functional as F

from stretch.model import ModelConfig, build_model, build_training_model
from stretch.precision import choose_compile, choose_fused_attention
from stretch.train import default_preset, preset

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# float32 rounding differs between the fused kernel and the reference's explicit softmax; bugs differ by far more
TOLERANCE = 1e-4
SHAPES = [ModelConfig(65, 2, 64, 4, 32), ModelConfig(50, 1, 48, 3, 16), ModelConfig(97, 3, 32, 1, 24)]


def twins(config, dropout=0.0, fused=True):
    """A reference TinyGPT and a training model holding exactly its weights."""
    torch.manual_seed(0)
    ref = build_model(config).eval()
    model = build_training_model(config, dropout, fused)
    model.load_state_dict(ref.state_dict(), strict=True)  # every name matches, nothing missing or extra
    return ref, model


def gap(ref, model, idx):
    with torch.no_grad():
        return (ref(idx) - model(idx)).abs().max().item()


@pytest.mark.parametrize("config", SHAPES, ids=lambda c: f"L{c.n_layers}-d{c.d}-h{c.n_heads}")
@pytest.mark.parametrize("train_mode", [False, True], ids=["eval", "train"])
def test_fused_attention_gives_the_reference_logits(config, train_mode):
    ref, model = twins(config)
    model.train(train_mode)  # dropout 0: training mode must not change a thing
    torch.manual_seed(1)
    for T in (config.block_size, config.block_size // 2, 1):
        idx = torch.randint(0, config.vocab_size, (3, T))
        assert gap(ref, model, idx) < TOLERANCE, f"the training model's logits differ from the reference at T={T}"


@pytest.mark.parametrize("train_mode", [False, True], ids=["eval", "train"])
def test_explicit_attention_is_the_reference_bit_for_bit(train_mode):
    """The CPU's path: the same operations as the reference, so CPU runs are exactly what they were."""
    ref, model = twins(SHAPES[0], fused=False)
    model.train(train_mode)
    idx = torch.randint(0, 65, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(ref(idx), model(idx))


def test_the_comparison_catches_attention_that_sees_the_future(monkeypatch):
    """The wrong direction: with the causal mask dropped, the same weights give logits far outside the tolerance."""
    ref, model = twins(SHAPES[0])
    fused = F.scaled_dot_product_attention

    def no_mask(q, k, v, **kwargs):
        return fused(q, k, v, dropout_p=kwargs.get("dropout_p", 0.0), is_causal=False)

    monkeypatch.setattr(F, "scaled_dot_product_attention", no_mask)
    idx = torch.randint(0, 65, (3, 32), generator=torch.Generator().manual_seed(1))
    assert gap(ref, model, idx) > 100 * TOLERANCE


def test_the_comparison_catches_one_changed_weight():
    ref, model = twins(SHAPES[0])
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight[0, 0] += 0.5
    idx = torch.randint(0, 65, (3, 32), generator=torch.Generator().manual_seed(1))
    assert gap(ref, model, idx) > 100 * TOLERANCE


def test_training_model_is_causal():
    _, model = twins(SHAPES[0])
    idx = torch.randint(0, 65, (2, 32), generator=torch.Generator().manual_seed(2))
    changed = idx.clone()
    changed[:, 20] = (changed[:, 20] + 1) % 65
    with torch.no_grad():
        before, after = model(idx), model(changed)
    assert torch.allclose(before[:, :20], after[:, :20]), "a later character changed an earlier prediction"
    assert not torch.allclose(before[:, 20:], after[:, 20:])


def test_same_seed_builds_the_reference_initial_weights():
    """So a CPU run of a preset starts from the weights it started from before fused attention."""
    config = SHAPES[0]
    torch.manual_seed(5)
    ref = build_model(config)
    torch.manual_seed(5)
    model = build_training_model(config, dropout=0.2)
    for name, tensor in ref.state_dict().items():
        assert torch.equal(tensor, model.state_dict()[name]), name


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "explicit"])
def test_dropout_is_on_in_training_and_off_in_evaluation(fused):
    ref, model = twins(SHAPES[0], dropout=0.2, fused=fused)
    idx = torch.randint(0, 65, (3, 32), generator=torch.Generator().manual_seed(1))
    model.train()
    with torch.no_grad():
        a, b = model(idx), model(idx)
    assert not torch.allclose(a, b), "dropout 0.2 in training mode should make two passes differ"
    assert gap(ref, model, idx) > 100 * TOLERANCE
    model.eval()
    assert gap(ref, model, idx) < TOLERANCE, "in evaluation dropout must be off: the reference's logits"


@pytest.mark.parametrize("dropout", [-0.1, 1.0])
def test_bad_dropout_is_refused_with_a_message(dropout):
    with pytest.raises(ValueError, match="dropout must be in"):
        build_training_model(SHAPES[0], dropout)


def test_gpu_path_is_chosen_by_the_device():
    assert default_preset("cuda") == "gpu" and default_preset("cuda:1") == "gpu"
    assert default_preset("cpu") == "stretch"
    assert choose_compile("cuda").on and not choose_compile("cpu").on
    assert choose_fused_attention("cuda") and not choose_fused_attention("cpu")
    assert choose_compile("cpu", asked=True).on and not choose_compile("cuda", asked=False).on
    gpu, lesson = preset("gpu"), preset("stretch")
    assert (gpu.n_layers, gpu.d, gpu.n_heads, gpu.block_size) == (
        lesson.n_layers,
        lesson.d,
        lesson.n_heads,
        lesson.block_size,
    ), "the GPU preset trains the lesson's model, only faster"
    assert gpu.batch_size == 64 and 0.1 <= gpu.dropout <= 0.2
    assert lesson.dropout == 0.0 and preset("fast").dropout == 0.0, "the CPU presets keep their recipes"
