"""Tests of convert_hf_checkpoint.py: config mapping, the torch-free .bin reader,
the tensor mapping, the atomic output folder and, on the real all-MiniLM-L6-v2,
parity of our BERT graph with the Hugging Face outputs in
tests/fixtures/minilm_reference.npz (made by tests/fixtures/make_minilm_reference.py).
"""

import collections
import json
import os
import pickle
import shutil
import struct
import zipfile

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from bert_toolkit.convert import hf_checkpoint as conv
from bert_toolkit.convert import safe_unpickle
from bert_toolkit.errors import InputError

import script_runs
from tiny import (
    FIXTURES,
    REPO,
    assert_one_line,
    make_hf_dir,
    read_checkpoint,
    tiny_hf_config,
    tiny_hf_state,
)

# ---------------------------------------------------------------------------
# Helpers: a tiny Hugging Face BERT folder
# ---------------------------------------------------------------------------


def expected_google_shapes(config, pooler=True, heads=False):
    """Google variable name -> shape, written out independently of the converter."""
    h, i = config["hidden_size"], config["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (config["vocab_size"], h),
        "bert/embeddings/token_type_embeddings": (config["type_vocab_size"], h),
        "bert/embeddings/position_embeddings": (config["max_position_embeddings"], h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
    }
    for n in range(config["num_hidden_layers"]):
        layer = "bert/encoder/layer_%d/" % n
        for dense, (in_size, out_size) in (("attention/self/query", (h, h)),
                                           ("attention/self/key", (h, h)),
                                           ("attention/self/value", (h, h)),
                                           ("attention/output/dense", (h, h)),
                                           ("intermediate/dense", (h, i)),
                                           ("output/dense", (i, h))):
            shapes[layer + dense + "/kernel"] = (in_size, out_size)
            shapes[layer + dense + "/bias"] = (out_size,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[layer + norm + "/gamma"] = (h,)
            shapes[layer + norm + "/beta"] = (h,)
    if pooler:
        shapes["bert/pooler/dense/kernel"] = (h, h)
        shapes["bert/pooler/dense/bias"] = (h,)
    if heads:
        shapes["cls/predictions/transform/dense/kernel"] = (h, h)
        shapes["cls/predictions/transform/dense/bias"] = (h,)
        shapes["cls/predictions/transform/LayerNorm/gamma"] = (h,)
        shapes["cls/predictions/transform/LayerNorm/beta"] = (h,)
        shapes["cls/predictions/output_bias"] = (config["vocab_size"],)
        shapes["cls/seq_relationship/output_weights"] = (2, h)
        shapes["cls/seq_relationship/output_bias"] = (2,)
    return shapes






# ---------------------------------------------------------------------------
# Helpers: torch-format archives written by hand (opcodes as torch.save emits)
# ---------------------------------------------------------------------------

def _op_global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _op_str(text):
    data = text.encode("utf-8")
    return b"X" + struct.pack("<I", len(data)) + data


def _op_int(value):
    return b"J" + struct.pack("<i", value)


def _op_tuple(*items):
    return b"(" + b"".join(items) + b"t"


def torch_like_pickle(tensors):
    """A protocol-2 pickle of an OrderedDict of _rebuild_tensor_v2 calls.

    tensors: name -> (storage class name, storage key, offset, size, stride).
    """
    empty_hooks = _op_global("collections", "OrderedDict") + b")R"
    out = [b"\x80\x02", _op_global("collections", "OrderedDict"), b")R("]
    for name, (storage_class, key, offset, size, stride) in tensors.items():
        pid = _op_tuple(_op_str("storage"), _op_global("torch", storage_class), _op_str(key),
                        _op_str("cpu"), _op_int(0))
        args = _op_tuple(pid + b"Q", _op_int(offset), _op_tuple(*map(_op_int, size)),
                         _op_tuple(*map(_op_int, stride)), b"\x89", empty_hooks)
        out += [_op_str(name), _op_global("torch._utils", "_rebuild_tensor_v2"), args, b"R"]
    out.append(b"u.")
    return b"".join(out)


def write_torch_zip(path, pickle_bytes, storages=None, byteorder=None, top="archive"):
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr(top + "/data.pkl", pickle_bytes)
        if byteorder is not None:
            archive.writestr(top + "/byteorder", byteorder)
        for key, raw in (storages or {}).items():
            archive.writestr(top + "/data/" + key, raw)
    return str(path)


class _RunsCommand(object):
    """Unpickling this would call `function(argument)`: the classic pickle exploit."""

    def __init__(self, function, argument):
        self.function = function
        self.argument = argument

    def __reduce__(self):
        return self.function, (self.argument,)


# ---------------------------------------------------------------------------
# config.json -> bert_config.json
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("hf_act, ours", [
    ("gelu", "gelu_exact"), ("gelu_python", "gelu_exact"), ("gelu_new", "gelu"),
    ("gelu_pytorch_tanh", "gelu"), ("gelu_fast", "gelu"), ("relu", "relu"),
])
def test_activation_names(hf_act, ours):
    assert conv.hf_config_to_bert_config(tiny_hf_config(hidden_act=hf_act))["hidden_act"] == ours


def test_config_fields():
    bert_config = conv.hf_config_to_bert_config(tiny_hf_config(hidden_dropout_prob=0.2))
    assert bert_config == {
        "vocab_size": 12, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 16, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.2,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
        "type_vocab_size": 2, "initializer_range": 0.02,
    }


def test_config_training_fields_default_like_hugging_face():
    config = tiny_hf_config()
    for field in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                  "model_type", "layer_norm_eps", "position_embedding_type"):
        del config[field]
    bert_config = conv.hf_config_to_bert_config(config)
    assert bert_config["hidden_dropout_prob"] == 0.1
    assert bert_config["initializer_range"] == 0.02


@pytest.mark.parametrize("field, value", [
    ("position_embedding_type", "relative_key"),
    ("is_decoder", True),
    ("add_cross_attention", True),
    ("layer_norm_eps", 1e-5),
    ("model_type", "roberta"),
    ("hidden_act", "swish"),
    ("hidden_size", "384"),
    ("num_attention_heads", 3),
])
def test_config_unsupported_values(field, value):
    with pytest.raises(InputError) as info:
        conv.hf_config_to_bert_config(tiny_hf_config(**{field: value}), source="x/config.json")
    assert_one_line(info.value, "x/config.json", field)


@pytest.mark.parametrize("field", ["vocab_size", "hidden_size", "hidden_act",
                                   "type_vocab_size", "max_position_embeddings"])
def test_config_missing_field(field):
    config = tiny_hf_config()
    del config[field]
    with pytest.raises(InputError) as info:
        conv.hf_config_to_bert_config(config)
    assert_one_line(info.value, "config.json", "missing", field)


# ---------------------------------------------------------------------------
# pytorch_model.bin without torch
# ---------------------------------------------------------------------------

def test_reads_torch_written_fixture():
    state = safe_unpickle.read_pytorch_bin(os.path.join(FIXTURES, "tiny_pytorch_model.bin"))
    expected = np.load(os.path.join(FIXTURES, "tiny_pytorch_model_expected.npz"))
    assert list(state) == list(expected.files)
    for key in expected.files:
        assert state[key].dtype == expected[key].dtype, key
        assert state[key].shape == expected[key].shape, key
        np.testing.assert_array_equal(state[key], expected[key], err_msg=key)
        assert state[key].flags.c_contiguous, key
    # bfloat16 became float32, and the three views of one storage agree:
    # transposed = base.T, shared_row = base[2], strided_slice = base[1:, ::2].
    assert state["bfloat16"].dtype == np.float32
    np.testing.assert_array_equal(state["transposed"][:, 2], state["shared_row"])
    np.testing.assert_array_equal(state["strided_slice"][1], state["shared_row"][::2])


def test_reader_honours_offsets_strides_and_byte_order(tmp_path):
    flat = np.arange(12, dtype=">f8")  # big-endian doubles, as a big-endian machine saves
    pickle_bytes = torch_like_pickle({
        "full": ("DoubleStorage", "0", 0, (3, 4), (4, 1)),
        "transposed": ("DoubleStorage", "0", 0, (4, 3), (1, 4)),
        "offset_view": ("DoubleStorage", "0", 5, (2, 2), (4, 2)),
        "scalar": ("DoubleStorage", "0", 7, (), ()),
    })
    path = write_torch_zip(tmp_path / "big.bin", pickle_bytes, {"0": flat.tobytes()},
                           byteorder=b"big", top="big")
    state = safe_unpickle.read_pytorch_bin(path)
    full = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_array_equal(state["full"], full)
    np.testing.assert_array_equal(state["transposed"], full.T)
    np.testing.assert_array_equal(state["offset_view"], [[5, 7], [9, 11]])
    assert state["scalar"].shape == () and state["scalar"] == 7


@pytest.mark.parametrize("offset, size, stride", [
    (0, (3, 5), (5, 1)),    # 15 elements from a storage of 12
    (10, (2, 2), (1, 1)),   # runs past the end
    (0, (2, 2), (-1, 1)),   # negative stride
    (-1, (2,), (1,)),       # negative offset
])
def test_reader_refuses_views_outside_their_storage(tmp_path, offset, size, stride):
    pickle_bytes = torch_like_pickle({"w": ("FloatStorage", "0", offset, size, stride)})
    path = write_torch_zip(tmp_path / "bad.bin", pickle_bytes,
                           {"0": np.zeros(12, np.float32).tobytes()})
    with pytest.raises(InputError) as info:
        safe_unpickle.read_pytorch_bin(path)
    assert_one_line(info.value, path)


def test_reader_names_a_missing_storage_record(tmp_path):
    pickle_bytes = torch_like_pickle({"w": ("FloatStorage", "7", 0, (2,), (1,))})
    path = write_torch_zip(tmp_path / "nodata.bin", pickle_bytes, {})
    with pytest.raises(InputError) as info:
        safe_unpickle.read_pytorch_bin(path)
    assert_one_line(info.value, path, "archive/data/7")


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("payload", ["os.system", "builtins.exec"])
def test_forbidden_global_is_refused_without_running(tmp_path, protocol, payload):
    marker = tmp_path / "side_effect"
    if payload == "os.system":
        exploit = _RunsCommand(os.system, "touch '%s'" % marker)
        forbidden = "system"
    else:
        exploit = _RunsCommand(exec, "open(%r, 'w').close()" % str(marker))
        forbidden = "exec"  # "__builtin__.exec" under protocol 2
    # Hidden inside an otherwise ordinary state dict.
    pickle_bytes = pickle.dumps(collections.OrderedDict([("bias", exploit)]), protocol=protocol)
    path = write_torch_zip(tmp_path / "pytorch_model.bin", pickle_bytes)
    with pytest.raises(InputError) as info:
        safe_unpickle.read_pytorch_bin(path)
    assert_one_line(info.value, path, "forbidden global", forbidden)
    assert not marker.exists()


def test_legacy_torch_format_is_refused_unread(tmp_path):
    marker = tmp_path / "side_effect"
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(pickle.dumps(_RunsCommand(os.system, "touch '%s'" % marker), protocol=2))
    with pytest.raises(InputError) as info:
        safe_unpickle.read_pytorch_bin(str(path))
    assert_one_line(info.value, str(path), "safetensors")
    assert not marker.exists()


def test_reader_refuses_non_tensor_entries(tmp_path):
    path = write_torch_zip(tmp_path / "odd.bin", pickle.dumps({"w": [1, 2]}, protocol=2))
    with pytest.raises(InputError) as info:
        safe_unpickle.read_pytorch_bin(path)
    assert_one_line(info.value, path, "'w'")


def test_hf_folder_with_pytorch_bin_is_read(tmp_path):
    shutil.copyfile(os.path.join(FIXTURES, "tiny_pytorch_model.bin"),
                    str(tmp_path / "pytorch_model.bin"))
    path, state = conv.load_hf_state(str(tmp_path))
    assert path == str(tmp_path / "pytorch_model.bin")
    assert "bf16_transposed" in state


# ---------------------------------------------------------------------------
# safetensors reading and the tensor mapping
# ---------------------------------------------------------------------------

def test_safetensors_bfloat16_widens_to_float32(tmp_path):
    values = np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)
    path = str(tmp_path / "model.safetensors")
    save_file({"w": values.astype(ml_dtypes.bfloat16)}, path)
    state = conv.read_safetensors(path)
    assert state["w"].dtype == np.float32
    np.testing.assert_array_equal(state["w"], values)


def test_broken_safetensors_is_an_input_error(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(InputError) as info:
        conv.read_safetensors(str(path))
    assert_one_line(info.value, str(path))


def test_sharded_safetensors_are_merged(tmp_path):
    config = tiny_hf_config()
    state = tiny_hf_state(config)
    keys = list(state)
    shards = {"model-00001-of-00002.safetensors": keys[:10],
              "model-00002-of-00002.safetensors": keys[10:]}
    for name, shard_keys in shards.items():
        save_file({k: state[k] for k in shard_keys}, str(tmp_path / name))
    weight_map = {k: name for name, shard_keys in shards.items() for k in shard_keys}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    path, loaded = conv.load_hf_state(str(tmp_path))
    assert path.endswith("model.safetensors.index.json")
    assert sorted(loaded) == sorted(keys)


def test_mapping_transposes_kernels_only():
    config = tiny_hf_config()
    bert_config = conv.hf_config_to_bert_config(config)
    state = tiny_hf_state(config, heads=True)
    variables, ignored = conv.hf_state_to_google_variables(state, bert_config)
    assert ignored == []
    np.testing.assert_array_equal(variables["bert/encoder/layer_1/intermediate/dense/kernel"],
                                  state["encoder.layer.1.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(variables["bert/embeddings/word_embeddings"],
                                  state["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(variables["bert/encoder/layer_0/output/LayerNorm/gamma"],
                                  state["encoder.layer.0.output.LayerNorm.weight"])
    # [2, hidden] in both layouts: Google's code keeps output_weights untransposed.
    np.testing.assert_array_equal(variables["cls/seq_relationship/output_weights"],
                                  state["cls.seq_relationship.weight"])
    np.testing.assert_array_equal(variables["cls/predictions/output_bias"],
                                  state["cls.predictions.bias"])
    assert all(v.dtype == np.float32 for v in variables.values())


def test_mapping_accepts_bert_prefix_and_gamma_beta():
    config = tiny_hf_config()
    bert_config = conv.hf_config_to_bert_config(config)
    state = tiny_hf_state(config, prefix="bert.", old_layer_norm=True, heads=True)
    state["classifier.weight"] = np.zeros((3, 8), np.float32)
    variables, ignored = conv.hf_state_to_google_variables(state, bert_config)
    assert {n: v.shape for n, v in variables.items()} == \
        expected_google_shapes(config, heads=True)
    np.testing.assert_array_equal(variables["bert/embeddings/LayerNorm/beta"],
                                  state["bert.embeddings.LayerNorm.beta"])
    np.testing.assert_array_equal(variables["cls/predictions/transform/LayerNorm/gamma"],
                                  state["cls.predictions.transform.LayerNorm.gamma"])
    assert ignored == ["classifier.weight"]


def test_mapping_refuses_an_untied_decoder():
    config = tiny_hf_config()
    state = tiny_hf_state(config, heads=True)
    state["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 1.0
    with pytest.raises(InputError) as info:
        conv.hf_state_to_google_variables(state, conv.hf_config_to_bert_config(config), "w.bin")
    assert_one_line(info.value, "w.bin", "cls.predictions.decoder.weight")


def test_mapping_refuses_an_incomplete_head():
    config = tiny_hf_config()
    state = tiny_hf_state(config, heads=True)
    del state["cls.seq_relationship.bias"]
    with pytest.raises(InputError) as info:
        conv.hf_state_to_google_variables(state, conv.hf_config_to_bert_config(config), "w.bin")
    assert_one_line(info.value, "w.bin", "missing tensor cls.seq_relationship.bias")


def test_mapping_refuses_layers_beyond_the_config():
    state = tiny_hf_state(tiny_hf_config(num_hidden_layers=3))
    bert_config = conv.hf_config_to_bert_config(tiny_hf_config(num_hidden_layers=2))
    with pytest.raises(InputError) as info:
        conv.hf_state_to_google_variables(state, bert_config, "w.bin")
    assert_one_line(info.value, "w.bin", "encoder.layer.2.")


# ---------------------------------------------------------------------------
# Whole conversions
# ---------------------------------------------------------------------------

def test_converts_a_tiny_safetensors_model(tmp_path):
    config = tiny_hf_config()
    state = tiny_hf_state(config)
    hf_dir = make_hf_dir(tmp_path / "hf", config, state)
    out = str(tmp_path / "out" / "google")
    result = conv.convert(hf_dir, out)

    assert sorted(os.listdir(out)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "vocab.txt"]
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["google"]  # no staging leftovers
    variables = read_checkpoint(os.path.join(out, "bert_model.ckpt"))
    assert {n: v.shape for n, v in variables.items()} == expected_google_shapes(config)
    assert all(v.dtype == np.float32 for v in variables.values())
    np.testing.assert_array_equal(variables["bert/encoder/layer_0/attention/self/query/kernel"],
                                  state["encoder.layer.0.attention.self.query.weight"].T)
    np.testing.assert_array_equal(variables["bert/pooler/dense/bias"], state["pooler.dense.bias"])
    with open(os.path.join(out, "bert_config.json")) as f:
        assert json.load(f) == conv.hf_config_to_bert_config(config)
    with open(os.path.join(out, "vocab.txt"), "rb") as a, \
            open(os.path.join(hf_dir, "vocab.txt"), "rb") as b:
        assert a.read() == b.read()
    assert result.num_variables == len(expected_google_shapes(config))
    assert result.num_parameters == sum(int(np.prod(s))
                                        for s in expected_google_shapes(config).values())
    assert result.ignored_keys == []
    assert not any("pooling" in note for note in result.notes)


def test_sentence_transformers_mean_pooling_gets_a_note(tmp_path):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config))
    os.makedirs(os.path.join(hf_dir, "1_Pooling"))
    with open(os.path.join(hf_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump({"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}, f)
    result = conv.convert(hf_dir, str(tmp_path / "out"))
    assert any("--pooling=mean" in note for note in result.notes)
    assert "note: " in conv.format_summary(result)


def test_converted_config_loads_in_modeling(tmp_path):
    modeling = pytest.importorskip("modeling")
    config = tiny_hf_config()
    out = str(tmp_path / "out")
    conv.convert(make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config)), out)
    bert_config = modeling.BertConfig.from_json_file(os.path.join(out, "bert_config.json"))
    assert bert_config.hidden_act == "gelu_exact"
    assert bert_config.type_vocab_size == 2


def test_float16_weights_become_float32(tmp_path):
    config = tiny_hf_config()
    state = collections.OrderedDict(
        (k, v.astype(np.float16) if v.dtype == np.float32 else v)
        for k, v in tiny_hf_state(config).items())
    out = str(tmp_path / "out")
    conv.convert(make_hf_dir(tmp_path / "hf", config, state), out)
    variables = read_checkpoint(os.path.join(out, "bert_model.ckpt"))
    assert variables["bert/embeddings/word_embeddings"].dtype == np.float32
    np.testing.assert_array_equal(variables["bert/embeddings/word_embeddings"],
                                  state["embeddings.word_embeddings.weight"].astype(np.float32))


def test_vocab_size_mismatch(tmp_path):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config), vocab_size=11)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, os.path.join(hf_dir, "vocab.txt"), "11", "12")
    assert not os.path.exists(str(tmp_path / "out"))


def test_missing_tensor_names_file_and_key(tmp_path):
    config = tiny_hf_config()
    state = tiny_hf_state(config)
    del state["encoder.layer.1.output.dense.weight"]
    hf_dir = make_hf_dir(tmp_path / "hf", config, state)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "model.safetensors", "encoder.layer.1.output.dense.weight",
                    "[8, 16]")


def test_wrong_shape_names_file_key_and_shapes(tmp_path):
    config = tiny_hf_config()
    state = tiny_hf_state(config)
    state["encoder.layer.0.intermediate.dense.weight"] = np.zeros((15, 8), np.float32)
    hf_dir = make_hf_dir(tmp_path / "hf", config, state)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "model.safetensors", "encoder.layer.0.intermediate.dense.weight",
                    "[15, 8]", "[16, 8]")


def test_missing_folder_and_missing_weights(tmp_path):
    with pytest.raises(InputError) as info:
        conv.convert(str(tmp_path / "nowhere"), str(tmp_path / "out"))
    assert_one_line(info.value, "nowhere", "no such folder")
    hf_dir = make_hf_dir(tmp_path / "hf", tiny_hf_config(), None)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, hf_dir, "model.safetensors", "pytorch_model.bin")


def test_failure_while_writing_leaves_no_output(tmp_path, monkeypatch):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config))

    def half_write(variables, prefix):
        with open(prefix + ".index", "wb") as f:
            f.write(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(conv, "write_checkpoint", half_write)
    parent = tmp_path / "models"
    parent.mkdir()
    with pytest.raises(RuntimeError):
        conv.convert(hf_dir, str(parent / "google"))
    assert os.listdir(str(parent)) == []

    # With --overwrite, the old folder survives a failed conversion untouched.
    old = parent / "google"
    old.mkdir()
    (old / "keep.txt").write_text("old model")
    with pytest.raises(RuntimeError):
        conv.convert(hf_dir, str(old), overwrite=True)
    assert os.listdir(str(parent)) == ["google"]
    assert os.listdir(str(old)) == ["keep.txt"]


def test_existing_output_needs_overwrite(tmp_path):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config))
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(out))
    assert_one_line(info.value, str(out), "--overwrite")
    assert os.listdir(str(out)) == ["old.txt"]

    conv.convert(hf_dir, str(out), overwrite=True)
    assert "old.txt" not in os.listdir(str(out))
    assert "bert_model.ckpt.index" in os.listdir(str(out))
    assert sorted(os.listdir(str(tmp_path))) == ["hf", "out"]


def test_output_must_not_be_the_input(tmp_path):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config))
    with pytest.raises(InputError):
        conv.convert(hf_dir, hf_dir, overwrite=True)
    with pytest.raises(InputError):
        conv.convert(hf_dir, str(tmp_path), overwrite=True)
    assert os.path.isfile(os.path.join(hf_dir, "model.safetensors"))


def _convert_command(*args):
    return script_runs.run([os.path.join(REPO, "convert_hf_checkpoint.py")] + list(args))


def test_script_prints_summary(tmp_path):
    config = tiny_hf_config()
    hf_dir = make_hf_dir(tmp_path / "hf", config, tiny_hf_state(config, prefix="bert."))
    out = str(tmp_path / "out")
    result = _convert_command("--hf_dir", hf_dir, "--output_dir", out)  # space-separated
    assert result.returncode == 0, result.stderr
    assert "wrote %d variables" % len(expected_google_shapes(config)) in result.stdout
    assert out in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--hf_dir={missing}", "--output_dir={out}"], "error: --hf_dir "),
    (["--output_dir={out}"], "error: --hf_dir is required"),
    (["--hf_dir={missing}", "--output_dir={out}", "--no_such_flag=1"], "error: "),
])
def test_script_reports_mistakes_in_one_line_exit_1(tmp_path, args, message):
    args = [a.format(missing=tmp_path / "nowhere", out=tmp_path / "out") for a in args]
    result = _convert_command(*args)
    assert result.returncode == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert not os.path.exists(str(tmp_path / "out"))


# ---------------------------------------------------------------------------
# The real model: our graph on the converted checkpoint vs. Hugging Face
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_minilm_matches_hugging_face(minilm_dir, tmp_path):
    import tensorflow as tf

    from bert_toolkit.model import modeling

    out = str(tmp_path / "minilm")
    result = conv.convert(minilm_dir, out)
    assert result.num_variables == 5 + 6 * 16 + 2 and result.ignored_keys == []

    reference = np.load(os.path.join(FIXTURES, "minilm_reference.npz"))
    checkpoint = os.path.join(out, "bert_model.ckpt")
    config = modeling.BertConfig.from_json_file(os.path.join(out, "bert_config.json"))
    assert config.hidden_act == "gelu_exact"
    with tf.Graph().as_default():
        model = modeling.BertModel(
            config, is_training=False,
            input_ids=tf.constant(reference["input_ids"]),
            input_mask=tf.constant(reference["input_mask"]),
            token_type_ids=tf.constant(reference["token_type_ids"]),
            compute_dtype=tf.float32)
        tvars = tf.compat.v1.trainable_variables()
        assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
            tvars, checkpoint)
        # Every variable of the graph must come from the checkpoint, none stay random.
        assert sorted(assignment_map) == sorted(v.name[:-2] for v in tvars)
        tf.compat.v1.train.init_from_checkpoint(checkpoint, assignment_map)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            sequence, pooled = session.run([model.get_sequence_output(),
                                            model.get_pooled_output()])

    mask = reference["input_mask"].astype(bool)
    for row in range(mask.shape[0]):  # four sentences, then the pair
        diff = np.abs(sequence[row][mask[row]] - reference["last_hidden_state"][row][mask[row]])
        assert diff.max() < 1e-4, "row %d (%s): max abs diff %g" % (
            row, reference["texts"][row], diff.max())
    np.testing.assert_allclose(pooled, reference["pooler_output"], atol=1e-4, rtol=0)
    print("MiniLM parity: last_hidden_state max abs diff %.3g, pooler %.3g" % (
        np.abs(sequence - reference["last_hidden_state"])[mask].max(),
        np.abs(pooled - reference["pooler_output"]).max()))
