"""SentencePiece's .model files read without the sentencepiece package: a small reader
of the protobuf wire format for the three messages a tokenizer needs (the pieces
with their scores and types, the TrainerSpec's model type and special ids, the
NormalizerSpec's precompiled character map), following sentencepiece_model.proto.

Reading the file here keeps the toolkit's install to what it has: the sentencepiece
package's own proto module needs a protobuf newer than TensorFlow 2.15.1 allows.
subword.py builds the Rust tokenizer from what this returns.
"""

import collections
import struct

# sentencepiece_model.proto: SentencePiece.Type and TrainerSpec.ModelType.
NORMAL, UNKNOWN = 1, 2
UNIGRAM, BPE = 1, 2
MODEL_TYPES = {1: "unigram", 2: "BPE", 3: "word", 4: "char"}

# Protobuf wire types.
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# Field number -> (name, kind) of the messages read, with the proto's defaults.
_PIECE_FIELDS = {1: ("piece", "string"), 2: ("score", "float"), 3: ("type", "int")}
_PIECE_DEFAULTS = {"piece": "", "score": 0.0, "type": NORMAL}
_TRAINER_FIELDS = {3: ("model_type", "int"), 35: ("byte_fallback", "bool"),
                   40: ("unk_id", "int"), 41: ("bos_id", "int"), 42: ("eos_id", "int"),
                   43: ("pad_id", "int")}
_TRAINER_DEFAULTS = {"model_type": UNIGRAM, "byte_fallback": False, "unk_id": 0,
                     "bos_id": 1, "eos_id": 2, "pad_id": -1}
_NORMALIZER_FIELDS = {1: ("name", "string"), 2: ("precompiled_charsmap", "bytes"),
                      3: ("add_dummy_prefix", "bool"), 4: ("remove_extra_whitespaces", "bool")}
_NORMALIZER_DEFAULTS = {"name": "", "precompiled_charsmap": b"", "add_dummy_prefix": True,
                        "remove_extra_whitespaces": True}
_KIND_WIRE = {"string": _LENGTH, "bytes": _LENGTH, "float": _FIXED32, "int": _VARINT,
              "bool": _VARINT}

SpmModel = collections.namedtuple("SpmModel", ["pieces", "trainer", "normalizer"])
"""A SentencePiece ModelProto: pieces, a list of dicts (piece, score, type);
trainer and normalizer, dicts of the TrainerSpec and NormalizerSpec fields above."""

class _Garbled(Exception):
    """The bytes are not a protobuf message of the expected shape."""


def _varint(data, pos):
    """(value, next position) of the base-128 varint at data[pos]."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Garbled("a number runs past the end of its bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data):
    """Yields (field number, wire type, raw value) of one protobuf message: an int
    for varints, bytes for the fixed-width and length-delimited ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Garbled("field number 0 at byte %d" % pos)
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        else:
            if wire == _LENGTH:
                size, pos = _varint(data, pos)
            elif wire in (_FIXED64, _FIXED32):
                size = 8 if wire == _FIXED64 else 4
            else:
                raise _Garbled("wire type %d at byte %d" % (wire, pos))
            if pos + size > len(data):
                raise _Garbled("field %d runs past the end of its bytes" % number)
            value, pos = data[pos:pos + size], pos + size
        yield number, wire, value


def _decode(number, wire, raw, kind):
    """A field's Python value of `kind` ("string", "bytes", "float", "int", "bool")."""
    if wire != _KIND_WIRE[kind]:
        raise _Garbled("field %d has wire type %d, expected %d"
                       % (number, wire, _KIND_WIRE[kind]))
    if kind == "string":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Garbled("field %d is not UTF-8" % number)
    if kind == "float":
        return struct.unpack("<f", raw)[0]
    if kind == "int":
        # A negative int32 (pad_id -1) is written as its 64-bit two's complement.
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if kind == "bool":
        return bool(raw)
    return bytes(raw)


def _message(data, schema, defaults):
    """The fields of `schema` (number -> (name, kind)) in one message, over `defaults`;
    other fields are skipped, as protobuf readers do."""
    values = dict(defaults)
    for number, wire, raw in _fields(data):
        if number in schema:
            name, kind = schema[number]
            values[name] = _decode(number, wire, raw, kind)
    return values


def parse(data):
    """An SpmModel of the bytes of a SentencePiece .model (a ModelProto: field 1
    the repeated pieces, 2 the TrainerSpec, 3 the NormalizerSpec). Raises ValueError
    saying what is wrong when the bytes are not one."""
    pieces, trainer, normalizer = [], dict(_TRAINER_DEFAULTS), dict(_NORMALIZER_DEFAULTS)
    try:
        for number, wire, raw in _fields(bytes(data)):
            if number not in (1, 2, 3):
                continue
            if wire != _LENGTH:
                raise _Garbled("field %d is not a message" % number)
            if number == 1:
                pieces.append(_message(raw, _PIECE_FIELDS, _PIECE_DEFAULTS))
            elif number == 2:
                trainer = _message(raw, _TRAINER_FIELDS, _TRAINER_DEFAULTS)
            else:
                normalizer = _message(raw, _NORMALIZER_FIELDS, _NORMALIZER_DEFAULTS)
    except _Garbled as exc:
        raise ValueError(str(exc))
    if not pieces:
        raise ValueError("no pieces")
    if not 0 <= trainer["unk_id"] < len(pieces):
        raise ValueError("unk_id %d outside its %d pieces" % (trainer["unk_id"], len(pieces)))
    if any(not piece["piece"] for piece in pieces):
        raise ValueError("an empty piece")
    return SpmModel(pieces, trainer, normalizer)
