# Writes data/ep_rules/*.json (run from anywhere: python3 scripts/ep_rules_gen.py). The op lists were typed from the
# sources named in each file's "source" field; edit here, regenerate, and run the unit tests.
# one-off generator for data/ep_rules/*.json, written from the sources named in each file's "source"
import json
F = ["float32"]; FD = ["float32","float64"]
ALLNUM = ["float64","float32","int16","int32","int64","int8","uint16","uint32","uint64","uint8"]
def R(op, since=1, until=None, level="supported", domain="", reason=None, **kw):
    r = {"domain": domain, "op_type": op, "since": since, "until": until, "level": level}
    r.update(kw)
    if reason: r["reason"] = reason
    return r
def dump(name, d):
    with open(f"./data/ep_rules/{name}.json","w") as f:
        json.dump(d, f, indent=1); f.write("\n")

# ---------------- CPU: docs/OperatorKernels.md (CPUExecutionProvider section), onnxruntime main @ 001d12d2
cpu_ops = """Abs 6;Acos 7;Acosh 9;Add 7;Affine 1;AffineGrid 20;And 7;ArgMax 1;ArgMin 1;Asin 7;Asinh 9;Atan 7;Atanh 9;
Attention 23;AveragePool 7;BatchNormalization 7;BitShift 11;BitwiseAnd 18;BitwiseNot 18;BitwiseOr 18;BitwiseXor 18;
BlackmanWindow 17;Cast 6;Ceil 6;Celu 12;Clip 6;Col2Im 18;Compress 9;Concat 4;ConcatFromSequence 11;ConstantOfShape 9;
Conv 1;ConvInteger 10;ConvTranspose 1;Cos 7;Cosh 9;Crop 1;CumSum 11;DFT 17;DepthToSpace 1;DequantizeLinear 10;Det 11;
Div 7;Dropout 7;DynamicQuantizeLinear 11;DynamicSlice 1;Einsum 12;Elu 6;Equal 7;Erf 9;Exp 6;Expand 8;EyeLike 9;
Flatten 1;Floor 6;GRU 7;Gather 1;GatherElements 11;GatherND 11;Gelu 20;Gemm 7;GlobalAveragePool 1;GlobalLpPool 2;
GlobalMaxPool 1;Greater 7;GreaterOrEqual 12;GridSample 16;HammingWindow 17;HannWindow 17;HardSigmoid 6;Hardmax 1;
Identity 1;If 1;ImageScaler 1;InstanceNormalization 6;IsInf 10;IsNaN 9;LRN 1;LSTM 7;LayerNormalization 1;LeakyRelu 6;
Less 7;LessOrEqual 12;Log 6;LogSoftmax 1;Loop 1;LpNormalization 1;LpPool 2;MatMul 1;MatMulInteger 10;Max 6;MaxPool 1;
MaxRoiPool 1;MaxUnpool 9;Mean 6;MeanVarianceNormalization 1;MelWeightMatrix 17;MemcpyFromHost 1;MemcpyToHost 1;Min 6;
Mod 10;Mul 7;Multinomial 7;Neg 6;NonZero 9;Not 1;OneHot 9;Optional 15;OptionalGetElement 15;OptionalHasElement 15;Or 7;
PRelu 7;Pad 2;ParametricSoftplus 1;Pow 7;QLinearConv 10;QLinearMatMul 10;QuantizeLinear 10;RMSNormalization 23;RNN 7;
RandomNormal 1;RandomNormalLike 1;RandomUniform 1;RandomUniformLike 1;Range 11;Reciprocal 6;ReduceL1 1;ReduceL2 1;
ReduceLogSum 1;ReduceLogSumExp 1;ReduceMax 1;ReduceMean 1;ReduceMin 1;ReduceProd 1;ReduceSum 1;ReduceSumSquare 1;
RegexFullMatch 20;Relu 6;Reshape 1;Resize 10;ReverseSequence 10;RoiAlign 10;RotaryEmbedding 23;Round 11;STFT 17;
Scale 1;ScaledTanh 1;Scan 8;Scatter 9-10;ScatterElements 11;ScatterND 11;Selu 6;SequenceAt 11;SequenceConstruct 11;
SequenceEmpty 11;SequenceErase 11;SequenceInsert 11;SequenceLength 11;Shape 1;Shrink 9;Sigmoid 6;Sign 9;
SimplifiedLayerNormalization 1;Sin 7;Sinh 9;Size 1;Slice 1;Softmax 1;Softplus 1;Softsign 1;SpaceToDepth 1;Split 2;
SplitToSequence 11;Sqrt 6;Squeeze 1;StringConcat 20;StringNormalizer 10;StringSplit 20;Sub 7;Sum 6;Tan 7;Tanh 6;
TensorScatter 24;TfIdfVectorizer 9;ThresholdedRelu 1;Tile 6;TopK 1;Transpose 1;Trilu 14;Unique 11;Unsqueeze 1;
Upsample 7-9;Where 9;Xor 7"""
cpu_dt = {"MatMul": ["float64","float32","int32","int64","uint32","uint64"], "Gemm": FD, "Conv": F, "ConvTranspose": F,
  "Softmax": FD, "LogSoftmax": FD, "Erf": F, "Sqrt": FD, "Exp": FD, "Log": FD, "Tanh": FD, "Sigmoid": FD, "Reciprocal": FD,
  "Relu": ["float64","float32","int32","int8"], "Add": ALLNUM, "Sub": ALLNUM, "Mul": ALLNUM, "Div": ALLNUM,
  "Pow": ["float64","float32","int32","int64"], "Gelu": F, "LayerNormalization": ["float64","float32","float16"],
  "ReduceMean": ["float64","float32","int32","int64"], "Cos": F, "Sin": FD, "Neg": ["float64","float32","int16","int32","int64","int8"],
  "Where": None, "AveragePool": F, "MaxPool": ["float64","float32","int8","uint8"], "GlobalAveragePool": F}
# Per-type constraints read from the same OperatorKernels.md rows (the newest opset row of each op), added after
# scripts/ep_rules_check_cpu.py showed ORT refusing these types; RNN layout and RoiAlign-22 from onnxruntime 1.32
# session creation (its error messages: "layout_ == 0 was false", "no implementation for RoiAlign(22)").
CAST_T = ["bfloat16","bool","float64","float32","float16","float8e4m3fn","float8e4m3fnuz","float8e5m2","float8e5m2fnuz",
  "int16","int2","int32","int4","int64","int8","string","uint16","uint2","uint32","uint4","uint64","uint8",
  "float8e8m0"]  # float8e8m0: newer than the snapshot, Cast to/from it runs in onnxruntime 1.32 (session creation)
CAST_TO = [1,2,3,4,5,6,7,8,9,10,11,12,13,16,17,18,19,20,21,22,24,25,26]  # the TensorProto numbers of CAST_T
MINMAX_T = ["float64","float32","float16","int32","int64","int8","uint32","uint64","uint8"]
POW_T = ["float64","float32","int32","int64"]
Q_T = ["float8e4m3fn","float8e4m3fnuz","float8e5m2","float8e5m2fnuz","int16","int2","int4","int8","uint16","uint2","uint4","uint8"]
RNN_LAYOUT = dict(attrs={"layout": [0]}, reason="CPU kernel registered; batch-major layout=1 is refused at session creation")
cpu_more = {
  "Cast": dict(dtypes={"0": CAST_T}, attrs={"to": CAST_TO}, reason="CPU kernel registered; no float4e2m1 kernel"),
  "Max": dict(dtypes={"0": MINMAX_T}), "Min": dict(dtypes={"0": MINMAX_T}),
  "Pow": dict(dtypes={"0": POW_T, "1": POW_T}),
  "TopK": dict(dtypes={"0": POW_T}),
  "DequantizeLinear": dict(dtypes={"0": Q_T + ["int32"]}, reason="CPU kernel registered; no float4e2m1 kernel"),
  "QuantizeLinear": dict(dtypes={"0": ["float32","float16"], "2": Q_T}, reason="CPU kernel registered; no float4e2m1 kernel"),
  "GRU": RNN_LAYOUT, "LSTM": RNN_LAYOUT, "RNN": RNN_LAYOUT,
  "RoiAlign": dict(until=21, reason="CPU kernel registered up to opset 21 (onnxruntime 1.32 has no RoiAlign-22 kernel)"),
}
rules = []
for item in cpu_ops.replace("\n","").split(";"):
    op, v = item.strip().split()
    lo, hi = (v.split("-") + [None])[:2]
    r = R(op, int(lo), int(hi) if hi else None, reason="CPU kernel registered")
    if cpu_dt.get(op): r["dtypes"] = {"0": cpu_dt[op]}
    if op == "Where": r["dtypes"] = {"1": ["float64","float32","int32","int64","string","uint8"]}
    if op in cpu_more: r.update(cpu_more[op])
    rules.append(r)
rules.append(R("CastLike", 1, dtypes={"0": CAST_T, "1": CAST_T}, reason="no CPU kernel; ORT expands the ONNX function body into Cast (no float4e2m1 kernel)"))
for op in ["HardSwish","Mish","GroupNormalization","CenterCropPad","Swish","NegativeLogLikelihoodLoss","SoftmaxCrossEntropyLoss","SequenceMap"]:
    rules.append(R(op, 1, reason="no CPU kernel; ORT expands the ONNX function body into primitive ops (verified with onnxruntime 1.32)"))
rules.append(R("BitCast", 1, dtypes={"0": [d for d in CAST_T if d not in ("bool", "string")]},
  reason="CPU kernel in onnxruntime 1.32 (verified by session creation, newer than the OperatorKernels.md snapshot); bool inputs are refused"))
for op, v in [("NonMaxSuppression", 10), ("CumProd", 1), ("DeformConv", 1), ("CausalConvWithState", 1), ("LinearAttention", 1)]:
    rules.append(R(op, v, reason="CPU kernel in onnxruntime 1.32 (verified by session creation; newer than or missing from the OperatorKernels.md snapshot)"))
for op, v in [("ArrayFeatureExtractor",1),("Binarizer",1),("CastMap",1),("CategoryMapper",1),("DictVectorizer",1),("FeatureVectorizer",1),("Imputer",1),("LabelEncoder",1),("LinearClassifier",1),("LinearRegressor",1),("Normalizer",1),("OneHotEncoder",1),("SVMClassifier",1),("SVMRegressor",1),("Scaler",1),("TreeEnsemble",5),("TreeEnsembleClassifier",1),("TreeEnsembleRegressor",1),("ZipMap",1)]:
    rules.append(R(op, v, domain="ai.onnx.ml", reason="CPU kernel registered (ai.onnx.ml)"))
rules.append(R("Constant", 1, reason="folded into an initializer by ORT (no kernel needed)"))
ms = "Attention 1;AttnLSTM 1;BeamSearch 1;BiasGelu 1;BifurcationDetector 1;CDist 1;ConvTransposeWithDynamicPads 1;CropAndResize 1;DecoderMaskedMultiHeadAttention 1;DequantizeLinear 1;DynamicQuantizeLSTM 1;DynamicQuantizeMatMul 1;DynamicTimeWarping 1;EmbedLayerNormalization 1;ExpandDims 1;FastGelu 1;FusedConv 1;FusedGemm 1;FusedMatMul 1;GatherBlockQuantized 1;GatherND 1;Gelu 1;GreedySearch 1;GridSample 1;GroupQueryAttention 1;Inverse 1;MatMulBnb4 1;MatMulFpQ4 1;MatMulInteger16 1;MatMulIntegerToFloat 1;MatMulNBits 1;MaxpoolWithMask 1;MoE 1;MultiHeadAttention 1;MurmurHash3 1;NGramRepeatBlock 1;NhwcMaxPool 1;Pad 1;QAttention 1;QEmbedLayerNormalization 1;QGemm 1;QLinearAdd 1;QLinearConv 1;QLinearLeakyRelu 1;QLinearMul 1;QLinearSigmoid 1;QLinearSoftmax 1;QLinearWhere 1;QMoE 1;QuantizeLinear 1;QuickGelu 1;Range 1;RotaryEmbedding 1;SampleOp 1;Sampling 1;SkipLayerNormalization 1;SkipSimplifiedLayerNormalization 1;SparseAttention 1;SparseToDenseMatMul 1;Tokenizer 1;TransposeMatMul 1;Trilu 1;UnfoldTensor 1;Unique 1;WhisperBeamSearch 1;WordConvEmbedding 1"
msdt = {"Attention": F, "MultiHeadAttention": F, "FastGelu": F, "BiasGelu": F, "Gelu": F, "QuickGelu": F,
        "GroupQueryAttention": ["float32","float16"], "RotaryEmbedding": ["float32","float16"], "MatMulNBits": ["float32","float16"],
        "SkipLayerNormalization": ["float64","float32","float16"], "SkipSimplifiedLayerNormalization": ["float64","float32","float16"],
        "EmbedLayerNormalization": None}
for item in ms.split(";"):
    op, v = item.split()
    r = R(op, int(v), domain="com.microsoft", reason="CPU contrib kernel registered")
    if msdt.get(op): r["dtypes"] = {"0": msdt[op]}
    rules.append(r)
dump("cpu", {"ep": "cpu", "version": 1,
  "source": "onnxruntime docs/OperatorKernels.md, CPUExecutionProvider section, main branch at commit 001d12d2 (2025). Complete for the ai.onnx and com.microsoft op lists and their lowest registered opset; opset gaps inside a range and per-type constraints are recorded only for the common transformer/CNN ops (dtypes of input 0). ai.onnx.ml ops are listed by name; com.microsoft.nchwc (internal, layout-optimizer only) is not covered. Checked against onnxruntime 1.32 CPU session creation on the 1325 ONNX backend node tests: ops with function bodies and a few kernels newer than the snapshot were added from that check, and per-type rows (Cast, CastLike, Max, Min, Pow, TopK, QuantizeLinear, DequantizeLinear, BitCast), RNN layout and RoiAlign's last opset were recorded until every test agrees (scripts/ep_rules_check_cpu.py: 1321 of 1321; 4 StringNormalizer tests fail on machines without the en_US locale and are not counted).",
  "devices": ["cpu"], "model_checks": {"static_shapes": False, "int64": "native", "float16": "cast", "control_flow": True, "max_opset": 27},
  "rules": rules})

def simple(names, domain="", reason="listed", **kw):
    return [R(n, 1, domain=domain, reason=reason, **kw) for n in names.split()]
def const(op, idx, why, since=1, **kw): return R(op, since, const_inputs=idx, reason=why, **kw)

# ---------------- QNN
q = simple("""Abs Add And ArgMax ArgMin Asin Atan AveragePool BatchNormalization Cast Ceil Clip Concat Conv ConvTranspose Cos
CumSum DepthToSpace DequantizeLinear Div Einsum Elu Equal Exp Flatten Floor Gather GatherElements GatherND Gelu Gemm
GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual GridSample HardSigmoid HardSwish InstanceNormalization LRN LSTM
LeakyRelu Less LessOrEqual Log LogSoftmax LpNormalization Max MaxPool Mean Min Mod Mul Neg Not Or PRelu Pow QuantizeLinear
ReduceL2 ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum Reciprocal Relu Reshape Resize Round ScatterND
ScatterElements Sigmoid Sign Sin Slice Softmax SpaceToDepth Split Sqrt Squeeze Sub Sum Tanh ThresholdedRelu Transpose
Unsqueeze Upsample Where Xor""", reason="in the QNN EP supported-op table")
q += [const("TopK", [1], "k must be a constant"), const("Tile", [1], "repeats must be a constant"),
      const("Pad", [1], "pads must be a constant"), const("Expand", [1], "shape must be a constant"),
      R("LayerNormalization", 1, attrs={"axis": [-1]}, reason="normalization axis must be the last one"),
      R("SimplifiedLayerNormalization", 1, max_rank=4, reason="RMSNorm supported up to rank 4"),
      R("RMSNormalization", 23, max_rank=4, reason="RMSNorm supported up to rank 4"),
      R("Gather", 1, level="partial", reason="indices must be non-negative (checked at run time only)"),
      R("MatMul", 1, devices=["npu"], level="partial", reason="HTP MatMul takes quantized (u8,u8), (u8,u16), (u16,u8) inputs; float graphs need QDQ (fp32 runs as fp16)"),
      R("MatMul", 1, devices=["gpu"], reason="in the QNN EP supported-op table"),
      R("MatMulNBits", 1, domain="com.microsoft", devices=["gpu"], attrs={"bits": [4], "block_size": [32]}, reason="QNN GPU only, 4 bits, block 32"),
      R("MatMulNBits", 1, domain="com.microsoft", devices=["npu"], level="unsupported", reason="MatMulNBits is QNN GPU only"),
      R("Loop", 1, level="unsupported", reason="control flow is not supported by QNN"),
      R("If", 1, level="unsupported", reason="control flow is not supported by QNN"),
      R("NonZero", 1, level="unsupported", reason="data-dependent output shape"),
      R("Constant", 1, reason="folded into an initializer")]
for op in ["GroupQueryAttention", "MultiHeadAttention", "Attention", "RotaryEmbedding", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "FastGelu"]:
    q.append(R(op, 1, domain="com.microsoft", level="unsupported", reason=f"contrib op {op} has no QNN op builder; falls back to CPU"))
dump("qnn", {"ep": "qnn", "version": 1,
  "source": "onnxruntime docs/execution-providers/QNN-ExecutionProvider.md (supported-op table) and core/providers/qnn/builder/op_builder_factory.cc as summarised in shared/facts/onnx-and-eps.md; op names only (no opset ranges), per-op constraints only for the ops the facts list. About 100 of the ~119 table rows.",
  "devices": ["npu", "gpu"], "model_checks": {"static_shapes": True, "int64": "cast", "control_flow": False, "max_opset": None},
  "rules": q})

# ---------------- OpenVINO
ov = simple("""Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization BitShift Cast Ceil
Celu Clip Concat ConstantOfShape Conv ConvInteger ConvTranspose Cos Cosh CumSum DepthToSpace DequantizeLinear Div
Dropout Einsum Elu Equal Erf Exp Expand EyeLike Flatten Floor Gather GatherElements GatherND Gelu Gemm GlobalAveragePool
GlobalLpPool GlobalMaxPool Greater GreaterOrEqual GridSample GRU HardMax HardSigmoid HardSwish Identity If
InstanceNormalization IsInf IsNaN LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax Loop LpNormalization LRN LSTM
MatMul MatMulInteger Max MaxPool Mean MeanVarianceNormalization Min Mish Mod Mul Neg NonMaxSuppression NonZero Not OneHot
Or Pad Pow PRelu QLinearConv QLinearMatMul QuantizeLinear Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Resize ReverseSequence RNN RoiAlign Round
Scatter ScatterElements ScatterND Selu Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax Softplus Softsign SpaceToDepth
Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile TopK Transpose Trilu Unique Upsample Where Xor""",
  reason="in the OpenVINO EP supported-op list")
ov += [R("Unsqueeze", 1, until=12, reason="axes as attribute"),
       R("Unsqueeze", 13, const_inputs=[1], reason="axes given as an input must be constant (the EP rejects non-constant axes)"),
       const("Reshape", [1], "a Reshape needs a constant shape input"),
       R("GroupQueryAttention", 1, domain="com.microsoft", devices=["gpu"], reason="GPU only"),
       R("GroupQueryAttention", 1, domain="com.microsoft", devices=["cpu", "npu"], level="unsupported", reason="GroupQueryAttention is OpenVINO GPU only"),
       R("MatMulNBits", 1, domain="com.microsoft", devices=["cpu", "gpu"], reason="CPU/GPU only"),
       R("MatMulNBits", 1, domain="com.microsoft", devices=["npu"], level="unsupported", reason="MatMulNBits is OpenVINO CPU/GPU only"),
       R("SimplifiedLayerNormalization", 1, reason="in the OpenVINO EP supported-op list"),
       R("SkipLayerNormalization", 1, domain="com.microsoft", reason="in the OpenVINO EP supported-op list"),
       R("SkipSimplifiedLayerNormalization", 1, domain="com.microsoft", reason="in the OpenVINO EP supported-op list"),
       R("Constant", 1, reason="folded into an initializer")]
for op in ["FastGelu", "RotaryEmbedding", "MultiHeadAttention"]:
    ov.append(R(op, 1, domain="com.microsoft", level="unsupported", reason=f"{op} is absent from the OpenVINO EP op list"))
dump("openvino", {"ep": "openvino", "version": 1,
  "source": "onnxruntime core/providers/openvino/ov_versions/data_ops.cc (op list with minimum OpenVINO version and devices) as summarised in shared/facts/onnx-and-eps.md; op names from memory of that list (about 150 of ~157), no per-version or per-device dtype sets yet.",
  "devices": ["cpu", "gpu", "npu"], "model_checks": {"static_shapes": False, "int64": "native", "control_flow": True, "max_opset": None},
  "device_checks": {"npu": {"static_shapes": True, "int64": "cast"}},
  "rules": ov})

# ---------------- VitisAI
va = simple("""Add AveragePool BatchNormalization Cast Clip Concat Conv ConvTranspose DepthToSpace DequantizeLinear Div Elu Erf
Exp Flatten Gather Gelu Gemm GlobalAveragePool GlobalMaxPool HardSigmoid HardSwish Identity InstanceNormalization
LayerNormalization LeakyRelu MatMul Max MaxPool Min Mul Neg Pad Pow PRelu QuantizeLinear ReduceMax ReduceMean ReduceMin
ReduceSum Relu Reshape Resize Sigmoid Slice Softmax SpaceToDepth Split Sqrt Squeeze Sub Tanh Tile Transpose Unsqueeze
Upsample Where Equal Greater Less Not And Expand ReduceL2 Sin Cos Reciprocal""",
  reason="in the Vitis AI NPU ops_support table (FP32->BF16 / INT8)")
va += [R("SimplifiedLayerNormalization", 1, reason="RMSNorm in the ops_support table"),
       R("Shape", 1, level="partial", reason="CPU-fallback tier: the graph is partitioned around it"),
       R("ConstantOfShape", 1, level="partial", reason="CPU-fallback tier"),
       R("Range", 1, level="partial", reason="CPU-fallback tier"),
       R("CumSum", 1, level="partial", reason="CPU-fallback tier"),
       R("NonZero", 1, level="unsupported", reason="data-dependent shape: CPU only"),
       R("Loop", 1, level="unsupported", reason="control flow: CPU only"),
       R("If", 1, level="unsupported", reason="control flow: CPU only"),
       R("Constant", 1, reason="folded into an initializer")]
dump("vitisai", {"ep": "vitisai", "version": 1,
  "source": "AMD Ryzen AI / Vitis AI documentation ops_support tables (NPU tier with FP32->BF16 / FP16 / INT8 columns) as summarised in shared/facts/onnx-and-eps.md; the EP's capability logic is closed, so this is an approximation of about 70 of ~100 ops, names only, no per-column dtype data yet.",
  "devices": ["npu"], "model_checks": {"static_shapes": True, "int64": "cast", "control_flow": False, "max_opset": 22},
  "rules": va})

# ---------------- DirectML: docs/OperatorKernels.md, DmlExecutionProvider section (same commit as the CPU data), read row by
# row: the lowest registered opset of each op and the types of its first input in the newest row ("Op since TYPES").
DT = {"FH": ["float32", "float16"], "F": ["float32"], "B": ["bool"], "I8": ["int8", "uint8"],
      "NUM": ["float32","float16","int16","int32","int64","int8","uint16","uint32","uint64","uint8"],
      "ANY": ["bool","float64","float32","float16","int16","int32","int64","int8","uint16","uint32","uint64","uint8"],
      "SINT": ["float32","float16","int16","int32","int64","int8"], "RELU": ["float32","float16","int16","int32","int8"],
      "RED": ["float32","float16","int32","int64","uint32","uint64"], "BITS": ["int16","int32","int64","int8","uint16","uint32","uint64","uint8"],
      "MOD": ["float32","float16","int16","int32","int8","uint16","uint32","uint8"], "-": None}
dml_ops = """Abs 6 SINT;Acos 7 FH;Acosh 9 FH;Add 7 NUM;Affine 1 FH;And 7 B;ArgMax 1 NUM;ArgMin 1 NUM;Asin 7 FH;Asinh 9 FH;Atan 7 FH;
Atanh 9 FH;AveragePool 7 FH;BatchNormalization 7 FH;BitShift 11 -;BitwiseAnd 18 BITS;BitwiseNot 18 BITS;BitwiseOr 18 BITS;
BitwiseXor 18 BITS;Cast 6 ANY;CastLike 15 ANY;Ceil 6 FH;Celu 12 FH;Clip 6 NUM;Col2Im 18 ANY;Concat 4 ANY;ConcatFromSequence 11 -;
ConstantOfShape 9 -;Conv 1 FH;ConvInteger 10 I8;ConvTranspose 1 FH;Cos 7 FH;Cosh 9 FH;Crop 1 FH;CumSum 11 RED;DFT 17 -;
DepthToSpace 1 ANY;DequantizeLinear 10 -;Div 7 NUM;Dropout 7 FH;DynamicQuantizeLinear 11 F;Einsum 12 FH;Elu 6 FH;Equal 7 NUM;
Erf 9 FH;Exp 6 FH;EyeLike 9 ANY;Flatten 1 ANY;Floor 6 FH;GRU 7 FH;Gather 1 ANY;GatherElements 11 ANY;GatherND 11 ANY;Gemm 7 FH;
GlobalAveragePool 1 FH;GlobalLpPool 2 FH;GlobalMaxPool 1 FH;Greater 7 NUM;GreaterOrEqual 12 NUM;GridSample 16 NUM;HardSigmoid 6 FH;
Hardmax 1 FH;Identity 1 ANY;If 7 -;ImageScaler 1 FH;InstanceNormalization 6 FH;IsInf 10 F;IsNaN 9 FH;LRN 1 FH;LSTM 7 FH;
LayerNormalization 1 FH;LeakyRelu 6 FH;Less 7 NUM;LessOrEqual 12 NUM;Log 6 FH;LogSoftmax 1 FH;LpNormalization 1 FH;LpPool 2 FH;
MatMul 1 FH;MatMulInteger 10 I8;Max 6 NUM;MaxPool 1 -;MaxRoiPool 1 FH;MaxUnpool 9 FH;Mean 6 FH;MeanVarianceNormalization 1 FH;
Min 6 NUM;Mod 10 MOD;Mul 7 NUM;Neg 6 SINT;Not 1 B;OneHot 9 -;OptionalGetElement 15 -;OptionalHasElement 15 -;Or 7 B;
PRelu 7 RELU;Pad 2 ANY;ParametricSoftplus 1 FH;Pow 7 -;QLinearConv 10 I8;QLinearMatMul 10 I8;QuantizeLinear 10 -;RNN 7 FH;
Reciprocal 6 FH;ReduceL1 1 RED;ReduceL2 1 RED;ReduceLogSum 1 RED;ReduceLogSumExp 1 RED;ReduceMax 1 ANY;ReduceMean 1 RED;
ReduceMin 1 ANY;ReduceProd 1 RED;ReduceSum 1 RED;ReduceSumSquare 1 RED;Relu 6 RELU;ReverseSequence 10 ANY;RoiAlign 10 FH;Round 11 FH;
STFT 17 FH;ScaledTanh 1 FH;Scatter 9 ANY;ScatterElements 11 ANY;ScatterND 11 ANY;Selu 6 FH;SequenceAt 11 -;SequenceConstruct 11 -;
SequenceEmpty 11 -;SequenceErase 11 -;SequenceInsert 11 -;SequenceLength 11 -;Shrink 9 MOD;Sigmoid 6 FH;Sign 9 NUM;Sin 7 FH;
Sinh 9 FH;Size 1 -;Softmax 1 FH;Softplus 1 FH;Softsign 1 FH;SpaceToDepth 1 ANY;Split 2 ANY;Sqrt 6 FH;Squeeze 1 ANY;Sub 7 NUM;
Sum 6 FH;Tan 7 FH;Tanh 6 FH;ThresholdedRelu 1 FH;Transpose 1 ANY;Trilu 14 ANY;Unsqueeze 1 ANY;Upsample 7 FH;Xor 7 B"""
dml_more = {"MaxPool": {"0": ["float32", "float16", "int8", "uint8"]}, "Pow": {"0": ["float32", "float16", "int32"]},
            "DequantizeLinear": {"0": ["int4", "int8", "uint4", "uint8", "int32"]},
            "QuantizeLinear": {"0": ["float32", "float16", "int32"]}, "Range": None}
dm = []
for item in dml_ops.replace("\n", "").split(";"):
    op, v, t = item.split()
    r = R(op, int(v), reason="DML kernel registered")
    dt = DT[t] if t != "-" else dml_more.get(op)
    if dt:
        r["dtypes"] = dt if isinstance(dt, dict) else {"0": dt}
    dm.append(r)
dm.append(R("Where", 9, dtypes={"1": DT["ANY"]}, reason="DML kernel registered"))
dm += [const("Reshape", [1], "shape must be a CPU constant", since=5, dtypes={"0": DT["ANY"]}),
       const("Slice", [1, 2], "starts/ends (and axes/steps) must be CPU constants", since=10, dtypes={"0": DT["ANY"]}),
       R("Slice", 1, until=9, dtypes={"0": DT["ANY"]}, reason="DML kernel registered"),
       const("Expand", [1], "shape must be a CPU constant", since=8, dtypes={"0": DT["ANY"]}),
       const("Tile", [1], "repeats must be a CPU constant", since=6, dtypes={"0": DT["ANY"]}),
       const("TopK", [1], "k must be a CPU constant", since=10, dtypes={"0": DT["NUM"]}),
       R("TopK", 1, until=9, dtypes={"0": DT["NUM"]}, reason="DML kernel registered"),
       const("Range", [0, 1, 2], "start/limit/delta must be CPU constants", since=11,
             dtypes={"0": ["float32", "int16", "int32", "int64"]}),
       R("Resize", 10, level="partial", dtypes={"0": ["float32", "float16", "int8", "uint8"]},
         reason="scales/sizes must be CPU constants"),
       R("NonZero", 9, level="partial", reason="runs on DML but cannot be fused into a DML graph partition"),
       R("Shape", 1, level="partial", reason="runs on DML but cannot be fused into a DML graph partition"),
       R("Loop", 1, level="unsupported", reason="no DML Loop kernel"),
       R("Constant", 1, reason="folded into an initializer")]
for op in "Gelu HardSwish Mish RandomNormal RandomNormalLike RandomUniform RandomUniformLike".split():
    dm.append(R(op, 1, level="unsupported", reason=f"no DML kernel for {op} in OperatorKernels.md (ai.onnx); ORT assigns it to the CPU EP"))
dm += simple("""Attention BiasAdd BiasGelu BiasSplitGelu ConvTransposeWithDynamicPads EmbedLayerNormalization FastGelu FusedMatMul
FusedMatMulActivation Gelu GroupNorm GroupQueryAttention MultiHeadAttention NhwcConv QuickGelu RotaryEmbedding SkipLayerNormalization
SkipSimplifiedLayerNormalization""", domain="com.microsoft", reason="DML contrib kernel registered", dtypes={"0": DT["FH"]})
dm += simple("""DequantizeLinear QAttention QLinearAdd QLinearAveragePool QLinearConcat QLinearGlobalAveragePool QLinearSigmoid
DynamicQuantizeMatMul MatMulIntegerToFloat QuantizeLinear""", domain="com.microsoft", reason="DML contrib kernel registered")
dm.append(R("MatMulNBits", 1, domain="com.microsoft", dtypes={"0": DT["FH"], "1": ["uint8"]}, reason="DML contrib kernel registered"))
dm.append(R("SimplifiedLayerNormalization", 1, dtypes={"0": DT["FH"]},
            reason="DML kernel registered (ONNX Runtime defines it in the default domain)"))
dump("dml", {"ep": "dml", "version": 2,
  "source": "onnxruntime docs/OperatorKernels.md, DmlExecutionProvider section, main branch at commit 001d12d2 (2025), read row by row: every ai.onnx row (Memcpy* and the GroupNorm row aside) and the 29 com.microsoft rows, with their lowest registered opset and the types of the first input in the newest row (older rows are sometimes narrower: not recorded); CPU-constant input rules (Reshape, Slice, Expand, Tile, TopK, Range, Resize) from OperatorRegistration.cpp as summarised in shared/facts/onnx-and-eps.md; Gelu (ai.onnx-20), HardSwish, Mish and the Random* ops have no DML row and are listed unsupported.",
  "devices": ["gpu"], "model_checks": {"static_shapes": False, "int64": "native", "control_flow": True, "max_opset": None},
  "rules": dm})
