package io.sparkmlt

import org.apache.spark.sql.{SparkSessionExtensions, SparkSessionExtensionsProvider}
import org.apache.spark.sql.catalyst.{FunctionIdentifier, InternalRow}
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.{TypeCheckFailure, TypeCheckSuccess}
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.expressions.codegen.{CodeGenerator, CodegenContext, ExprCode}
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types._

import scala.util.{Either, Left, Right}

/** A call's constants, read from its literal arguments, and the layout it reads or writes. */
private[sparkmlt] final case class MltSpec(call: MltCall, layout: String) {
  def codec: MltCodec = call.codec
  def literal: Literal = Literal(call, ObjectType(classOf[MltCall]))
  def shown: String = s"codec(p=${codec.p}, n=${codec.n}, ${codec.fingerprint.take(12)})"
}

private[sparkmlt] object MltSpec {
  /** tinyint .. bigint (Spark's IntegralType is internal to it). */
  def integral(t: DataType): Boolean = t match {
    case ByteType | ShortType | IntegerType | LongType => true
    case _ => false
  }

  /** The token types the other engines write (nullable elements and fields), so that one
   * table takes appends from every engine. */
  val arrayType: DataType = ArrayType(IntegerType, containsNull = true)
  def structType(n: Int): DataType = StructType((0 until n).map(j => StructField(s"t$j", IntegerType)))

  val ArrayShown = "array<int>"
  val StructShown = "struct<t0:int, ...>"
  private val Shown = Seq("array" -> ArrayShown, "struct" -> StructShown, "vector" -> "vector", "packed" -> "bigint")

  /** What a column of the wrong type fails with; the same text as spark_mlt's TokenLayout.hint. */
  def hint(layout: String, codec: MltCodec, name: String): String = {
    val last = codec.n - 1
    val fields = if (last > 1) s", ..., t$last:int" else if (last == 1) ", t1:int" else ""
    val expected = Shown.toMap.apply(layout).replace(", ...", fields)
    val others = Shown.filter(_._1 != layout).map { case (l, s) => s"layout='$l' for $s" }.mkString(", ")
    s"spark-mlt: $name must hold $expected tokens (layout='$layout', n=${codec.n}); " +
      s"pass the layout the column holds ($others), as mlt_encode's layout= wrote it"
  }

  private def constant(function: String, what: String, value: Expression): Either[String, Option[String]] =
    if (value.dataType == NullType) Right(None)
    else if (!value.foldable || value.dataType != StringType) {
      Left(s"$function: $what must be a constant string, got ${value.sql}")
    } else Right(Option(value.eval()).map(_.toString))

  def read(
      function: String,
      input: Expression,
      codec: Expression,
      layout: Expression,
      handleInvalid: Expression,
      label: Expression,
      layouts: Seq[String]): Either[String, MltSpec] =
    for {
      json <- constant(function, "the codec (its JSON, MLTCodec.to_json())", codec)
      chosenLayout <- constant(function, "layout", layout)
      handle <- constant(function, "handle_invalid", handleInvalid)
      named <- constant(function, "name", label)
      parsed <- json match {
        case None => Left(s"$function: the codec is null; pass the codec's JSON, MLTCodec.to_json()")
        case Some(text) =>
          try Right(MltCodec.of(text))
          catch { case e: IllegalArgumentException => Left(s"$function: ${e.getMessage}") }
      }
      chosen <- chosenLayout.getOrElse(layouts.head) match {
        case l if layouts.contains(l) => Right(l)
        case other => Left(s"$function: layout must be one of ${layouts.map(l => s"'$l'").mkString(", ")}; got '$other'")
      }
      errors <- handle.getOrElse("error") match {
        case "error" => Right(true)
        case "null" => Right(false)
        case other => Left(s"$function: handle_invalid must be one of 'error', 'null'; got '$other'")
      }
    } yield {
      val name = named.getOrElse(input match {
        case a: AttributeReference => s"column '${a.name}'"
        case _ => "a column expression"
      })
      MltSpec(new MltCall(parsed, errors, name), chosen)
    }
}

/**
 * One operation of one codec on a bigint id or on tokens: what the functions' array, packed
 * and struct layouts run. Whole-stage code generation emits the codec's own kernel
 * ([[MltKernel]]: its constants are literals, its tables fields of the generated class, the
 * kernel a method of that class), with invalid rows leaving through a cold call of
 * [[MltCalls]]; the interpreted path (`eval`) calls [[MltCalls]], which gives the same rows.
 *
 * Operations: encodeArray, encodeStruct and encodePacked (of a bigint id), decodePacked (a bigint),
 * decodeInts (array<int>), decodeLongs (array<bigint>), decodeRow (a struct's integral fields
 * t0 .., read in place).
 */
case class MltKernelCall(child: Expression, call: MltCall, operation: String, fields: Seq[(Int, Int)] = Nil)
    extends UnaryExpression {
  // decodeRow: token j is the struct's field fields(j)._1, of fields(j)._2 bytes (1, 2, 4 or 8);
  // built once, not per row of the interpreted path
  @transient private lazy val ordinals: Array[Int] = fields.map(_._1).toArray
  @transient private lazy val widths: Array[Int] = fields.map(_._2).toArray

  override def dataType: DataType = operation match {
    case "encodeArray" => MltSpec.arrayType
    case "encodeStruct" => MltSpec.structType(call.codec.n)
    case _ => LongType
  }
  private def bigint: Boolean = dataType == LongType
  /** A bigint that fails the query on an invalid row is null only for a null input. */
  override def nullable: Boolean = !bigint || !call.errors || child.nullable

  override protected def nullSafeEval(input: Any): Any = operation match {
    case "encodeArray" => MltCalls.encodeArray(call, input.asInstanceOf[Long])
    case "encodeStruct" => MltCalls.encodeStruct(call, input.asInstanceOf[Long])
    case "encodePacked" => MltCalls.encodePacked(call, input.asInstanceOf[Long])
    case "decodePacked" => MltCalls.decodePacked(call, input.asInstanceOf[Long])
    case "decodeInts" => MltCalls.decodeInts(call, input.asInstanceOf[ArrayData])
    case "decodeLongs" => MltCalls.decodeLongs(call, input.asInstanceOf[ArrayData])
    case _ => MltCalls.decodeRow(call, input.asInstanceOf[InternalRow], ordinals, widths)
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val calls = classOf[MltCalls].getName
    val callRef = ctx.addReferenceObj("mltCall", call, classOf[MltCall].getName)
    val kernel = MltKernel.of(call.codec)
    val encodes = operation.startsWith("encode")
    // the cold path: the interpreted path's method, which raises the query's error (or gives null)
    val strict = if (bigint) operation + "Strict" else operation
    // decodeRow's call also takes the fields' ordinals and widths
    val extra = if (operation == "decodeRow") {
      s", ${ctx.addReferenceObj("mltOrdinals", ordinals, "int[]")}, ${ctx.addReferenceObj("mltWidths", widths, "int[]")}"
    } else ""
    def invalid(input: String): String =
      if (call.errors) s"${ev.value} = $calls.$strict($callRef, $input$extra);" else s"${ev.isNull} = true;"
    if (kernel == null) { // n above 64: the interpreted path's method, called from generated code
      if (call.errors && bigint) {
        return nullSafeCodeGen(ctx, ev, input => s"${ev.value} = $calls.$strict($callRef, $input$extra);")
      }
      val boxed = ctx.freshName("mltResult")
      val boxedType = if (bigint) "java.lang.Long" else CodeGenerator.javaType(dataType)
      return nullSafeCodeGen(ctx, ev, input =>
        s"""$boxedType $boxed = $calls.$operation($callRef, $input$extra);
           |if ($boxed == null) {
           |  ${ev.isNull} = true;
           |} else {
           |  ${ev.value} = $boxed;
           |}""".stripMargin)
    }
    val prefix = ctx.freshName("mlt")
    kernel.fields(prefix).foreach { field =>
      val Array(javaType, name, accessor) = field
      ctx.addMutableState(javaType, name, v => s"$v = $callRef.codec.$accessor();", forceInline = true,
        useFreshName = false)
    }
    val name = ctx.freshName("mltKernel")
    val source = operation match {
      case "encodeArray" => kernel.encodeArray(name, prefix)
      case "encodeStruct" => kernel.encodeStruct(name, prefix)
      case "encodePacked" => kernel.encodePacked(name, prefix)
      case "decodePacked" => kernel.decodePacked(name, prefix)
      case "decodeInts" => kernel.decodeArray(name, prefix, false)
      case "decodeLongs" => kernel.decodeArray(name, prefix, true)
      case _ => kernel.decodeRow(name, prefix, ordinals, widths)
    }
    val function = ctx.addNewFunction(name, source)
    if (encodes) {
      nullSafeCodeGen(ctx, ev, id =>
        s"""if ($id < 0L || $id > ${call.codec.maxId}L) {
           |  ${invalid(id)}
           |} else {
           |  ${ev.value} = $function($id);
           |}""".stripMargin)
    } else {
      val decoded = ctx.freshName("mltId")
      nullSafeCodeGen(ctx, ev, tokens =>
        s"""long $decoded = $function($tokens);
           |if ($decoded < 0L) {
           |  ${invalid(tokens)}
           |} else {
           |  ${ev.value} = $decoded;
           |}""".stripMargin)
    }
  }

  /** mlt_encode_array, mlt_decode_packed, ...: the operation, as plans show it. */
  override def prettyName: String = "mlt_" + operation.replaceAll("([A-Z])", "_$1").toLowerCase

  override def toString: String = s"$prettyName($child, ${call.codec})"

  override protected def withNewChildInternal(c: Expression): MltKernelCall = copy(child = c)
}

/**
 * The shape of the three functions: `f(value, codec[, layout[, handle_invalid[, name]]])`,
 * each a RuntimeReplaceable whose replacement is an [[MltKernelCall]] (array, packed and
 * struct tokens) or one static call of [[MltCalls]] (vectors, decimals, unpacking). The
 * arguments after the value must be constants; they are checked when Spark analyses the
 * query, and a wrong input type fails analysis naming the column, its type and the fix.
 */
abstract class MltFunction extends Expression with RuntimeReplaceable {
  def child: Expression
  def codec: Expression
  def layout: Expression
  def handleInvalid: Expression
  def label: Expression
  protected def layouts: Seq[String]
  /** None when the input type suits the layout, else the message. */
  protected def inputProblem(spec: MltSpec): Option[String]
  protected def resultType(spec: MltSpec): DataType
  protected def build(spec: MltSpec): Expression

  override def children: Seq[Expression] = Seq(child, codec, layout, handleInvalid, label)

  private[sparkmlt] lazy val spec: Either[String, MltSpec] =
    MltSpec.read(prettyName, child, codec, layout, handleInvalid, label, layouts)

  override def checkInputDataTypes(): TypeCheckResult = spec match {
    case Left(problem) => TypeCheckFailure(problem)
    case Right(s) => inputProblem(s).map(TypeCheckFailure(_)).getOrElse(TypeCheckSuccess)
  }

  override lazy val replacement: Expression = spec match {
    case Right(s) if inputProblem(s).isEmpty => build(s)
    case _ => Literal(null, dataType)
  }

  override def dataType: DataType = spec.fold(_ => NullType, resultType)
  override def nullable: Boolean = true

  protected def invoke(method: String, returns: DataType, arguments: Expression*): Expression =
    StaticInvoke(classOf[MltCalls], returns, method, arguments, propagateNull = true, returnNullable = true)

  /** A bigint result: where an invalid row fails the query it is never null, and the call
   * returns a primitive long (no box per row). */
  protected def invokeLong(spec: MltSpec, method: String, arguments: Expression*): Expression =
    if (spec.call.errors) {
      StaticInvoke(classOf[MltCalls], LongType, method + "Strict", arguments, propagateNull = true,
        returnNullable = false)
    } else invoke(method, LongType, arguments: _*)

  private def shownCodec: String = spec.fold(_ => "codec", _.shown)
  override def sql: String = s"$prettyName(${child.sql}, $shownCodec)"
  override def toString: String = s"$prettyName($child, $shownCodec)"
}

/** `mlt_encode(id, codec[, layout[, handle_invalid[, name]]])`: tokens of an integral or decimal id. */
case class MltEncode(child: Expression, codec: Expression, layout: Expression, handleInvalid: Expression,
    label: Expression) extends MltFunction {
  override def prettyName: String = "mlt_encode"
  override protected def layouts: Seq[String] = Seq("array", "struct", "packed", "vector")

  override protected def inputProblem(spec: MltSpec): Option[String] = {
    val packed =
      if (spec.layout == "packed" && spec.codec.packedBits == 0) {
        Some(s"spark-mlt: the packed layout needs n * bit_length(p - 1) <= 64 bits; p=${spec.codec.p}, " +
          s"n=${spec.codec.n} needs ${spec.codec.tokenBits * spec.codec.n}: store these tokens as arrays")
      } else None
    packed.orElse(child.dataType match {
      case t if MltSpec.integral(t) => None
      case _: DecimalType | NullType => None
      case other => Some(s"spark-mlt: ${spec.call.name} must hold integral or decimal ids, got ${other.sql}")
    })
  }

  override protected def resultType(spec: MltSpec): DataType = spec.layout match {
    case "array" => MltSpec.arrayType
    case "struct" => MltSpec.structType(spec.codec.n)
    case "packed" => LongType
    case _ => ArrayType(DoubleType)
  }

  override protected def build(spec: MltSpec): Expression = {
    val id = child.dataType match {
      case _: DecimalType => invoke("decimalId", LongType, spec.literal, child)
      case _ => Cast(child, LongType)
    }
    spec.layout match {
      case "array" => MltKernelCall(id, spec.call, "encodeArray")
      case "struct" => MltKernelCall(id, spec.call, "encodeStruct")
      case "packed" => MltKernelCall(id, spec.call, "encodePacked")
      case _ => invoke("encodeValues", dataType, spec.literal, id)
    }
  }

  override protected def withNewChildrenInternal(c: IndexedSeq[Expression]): MltEncode =
    copy(child = c(0), codec = c(1), layout = c(2), handleInvalid = c(3), label = c(4))
}

/** `mlt_decode(tokens, codec[, layout[, handle_invalid[, name]]])`: the bigint id of tokens. */
case class MltDecode(child: Expression, codec: Expression, layout: Expression, handleInvalid: Expression,
    label: Expression) extends MltFunction {
  override def prettyName: String = "mlt_decode"
  override protected def layouts: Seq[String] = Seq("auto", "array", "struct", "packed", "vector")

  private def integral(t: DataType): Boolean = MltSpec.integral(t)

  /** The layout: the one asked for, or (auto) the one the column's type shows. */
  private def chosen(spec: MltSpec): String = if (spec.layout != "auto") spec.layout else child.dataType match {
    case t if integral(t) => "packed"
    case ArrayType(t, _) if integral(t) => "array"
    case ArrayType(DoubleType | FloatType, _) => "vector"
    case _: StructType => "struct"
    case _ => "array"
  }

  private def fields(spec: MltSpec): Option[Seq[(StructField, Int)]] = child.dataType match {
    case s: StructType =>
      val wanted = (0 until spec.codec.n).map(j => s"t$j")
      val found = wanted.flatMap(name => s.fields.zipWithIndex.find(_._1.name == name))
      if (found.length == wanted.length && found.forall(f => integral(f._1.dataType))) Some(found) else None
    case _ => None
  }

  override protected def inputProblem(spec: MltSpec): Option[String] = {
    val layout = chosen(spec)
    val fits = layout match {
      case "array" => child.dataType match { case ArrayType(t, _) => integral(t); case _ => false }
      case "struct" => fields(spec).isDefined
      case "packed" => integral(child.dataType)
      case _ => child.dataType match { case ArrayType(_: NumericType, _) => true; case _ => false }
    }
    val packed =
      if (layout == "packed" && spec.codec.packedBits == 0) {
        Some(s"spark-mlt: p=${spec.codec.p}, n=${spec.codec.n} tokens do not fit in 64 bits: they are never packed")
      } else None
    val shownLayout = if (layout == "vector") "vector" else layout
    packed.orElse(if (fits || child.dataType == NullType) None
      else Some(MltSpec.hint(shownLayout, spec.codec, spec.call.name) + s" (the column is ${child.dataType.sql})"))
  }

  override protected def resultType(spec: MltSpec): DataType = LongType

  override protected def build(spec: MltSpec): Expression = {
    val call = spec.literal
    chosen(spec) match {
      case _ if child.dataType == NullType => Literal(null, LongType)
      case "array" => child.dataType match {
        case ArrayType(IntegerType, _) => MltKernelCall(child, spec.call, "decodeInts")
        case _ => MltKernelCall(Cast(child, ArrayType(LongType)), spec.call, "decodeLongs")
      }
      case "struct" =>
        val read = fields(spec).get.map { case (f, i) => (i, f.dataType.defaultSize) }
        MltKernelCall(child, spec.call, "decodeRow", read)
      case "packed" => MltKernelCall(Cast(child, LongType), spec.call, "decodePacked")
      case _ => child.dataType match {
        case ArrayType(DoubleType, _) => invokeLong(spec, "decodeValues", call, child)
        case _ => invokeLong(spec, "decodeValues", call, Cast(child, ArrayType(DoubleType)))
      }
    }
  }

  override protected def withNewChildrenInternal(c: IndexedSeq[Expression]): MltDecode =
    copy(child = c(0), codec = c(1), layout = c(2), handleInvalid = c(3), label = c(4))
}

/** `mlt_unpack(packed, codec[, layout[, handle_invalid[, name]]])`: the tokens of a packed bigint. */
case class MltUnpack(child: Expression, codec: Expression, layout: Expression, handleInvalid: Expression,
    label: Expression) extends MltFunction {
  override def prettyName: String = "mlt_unpack"
  override protected def layouts: Seq[String] = Seq("array", "struct")

  override protected def inputProblem(spec: MltSpec): Option[String] =
    if (spec.codec.packedBits == 0) {
      Some(s"spark-mlt: p=${spec.codec.p}, n=${spec.codec.n} tokens do not fit in 64 bits: they are never packed")
    } else if (MltSpec.integral(child.dataType) || child.dataType == NullType) None
    else Some(MltSpec.hint("packed", spec.codec, spec.call.name) + s" (the column is ${child.dataType.sql})")

  override protected def resultType(spec: MltSpec): DataType = spec.layout match {
    case "array" => MltSpec.arrayType
    case _ => MltSpec.structType(spec.codec.n)
  }

  override protected def build(spec: MltSpec): Expression =
    invoke(if (spec.layout == "array") "unpackArray" else "unpackStruct", dataType, spec.literal, Cast(child, LongType))

  override protected def withNewChildrenInternal(c: IndexedSeq[Expression]): MltUnpack =
    copy(child = c(0), codec = c(1), layout = c(2), handleInvalid = c(3), label = c(4))
}

/** A call with the wrong number of arguments: fails analysis naming the signature. */
case class MltArity(function: String, signature: String, expected: String, children: Seq[Expression])
    extends Expression {
  // not Spark's Unevaluable: its parents differ between Spark 4.0 and 4.3, and one jar serves both
  override def dataType: DataType = NullType
  override def nullable: Boolean = true
  override def eval(input: InternalRow): Any = throw new UnsupportedOperationException(signature)
  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode =
    throw new UnsupportedOperationException(signature)
  override def checkInputDataTypes(): TypeCheckResult =
    TypeCheckFailure(s"$function takes $expected, $signature; got ${children.length}")
  override protected def withNewChildrenInternal(c: IndexedSeq[Expression]): MltArity = copy(children = c)
}

/** The SQL functions, and how to register them in a session or through its extensions. */
object MltFunctions {
  private type Make = (Expression, Expression, Expression, Expression, Expression) => Expression

  private val Signature = "(value, codec[, layout[, handle_invalid[, name]]])"

  private def builder(name: String, make: Make)(arguments: Seq[Expression]): Expression = {
    val none = Literal(null, NullType)
    val padded = arguments ++ Seq.fill(5 - arguments.length)(none)
    if (arguments.length < 2 || arguments.length > 5) MltArity(name, s"$name$Signature", "2 to 5 arguments", arguments)
    else make(padded(0), padded(1), padded(2), padded(3), padded(4))
  }

  /** The usage a catalog shows (`spark.catalog.getFunction(name).description`): it ends with the
   * jar's version, which the Python package checks against its own. */
  private def describe(name: String, clazz: Class[_], what: String): ExpressionInfo =
    new ExpressionInfo(clazz.getCanonicalName, null, name, s"_FUNC_$Signature - $what (spark-mlt $version)", "")

  /** (name, description, builder) of each function, as SparkSessionExtensions.injectFunction takes them. */
  val functions: Seq[(FunctionIdentifier, ExpressionInfo, FunctionRegistry.FunctionBuilder)] = Seq(
    ("mlt_encode", classOf[MltEncode], "the MLT tokens of an integral or decimal id (layout: array, struct, " +
      "packed, vector = the values of an ML vector)", (MltEncode.apply _): Make),
    ("mlt_decode", classOf[MltDecode], "the bigint id of MLT tokens (layout: auto, array, struct, packed, vector)",
      (MltDecode.apply _): Make),
    ("mlt_unpack", classOf[MltUnpack], "the tokens (array or struct) of packed MLT tokens", (MltUnpack.apply _): Make)
  ).map { case (name, clazz, what, make) =>
    (FunctionIdentifier(name), describe(name, clazz, what), builder(name, make) _)
  }

  private def registry(session: AnyRef): FunctionRegistry = {
    val state = session.getClass.getMethod("sessionState").invoke(session)
    state.getClass.getMethod("functionRegistry").invoke(state).asInstanceOf[FunctionRegistry]
  }

  /** Registers the functions in a running session (what the extension does when a session starts). */
  def register(session: AnyRef): Unit =
    functions.foreach { case (id, info, make) => registry(session).registerFunction(id, info, make) }

  /**
   * Registers `name(value)`: `function` (mlt_encode or mlt_decode) with one codec, layout and
   * handle_invalid, in a running classic session (Spark 3.5 has no SQL functions to wrap a call in).
   */
  def registerBound(session: AnyRef, name: String, function: String, json: String, layout: String,
      handleInvalid: String): Unit = {
    val (make, clazz): (Make, Class[_]) = function match {
      case "mlt_encode" => ((MltEncode.apply _): Make, classOf[MltEncode])
      case "mlt_decode" => ((MltDecode.apply _): Make, classOf[MltDecode])
      case other => throw new IllegalArgumentException(s"no spark-mlt function $other")
    }
    val builder: FunctionRegistry.FunctionBuilder = arguments =>
      if (arguments.length == 1) {
        make(arguments.head, Literal(json), Literal(layout), Literal(handleInvalid), Literal(name))
      } else MltArity(name, s"$name(value)", "1 argument", arguments)
    val info = new ExpressionInfo(clazz.getCanonicalName, null, name,
      s"_FUNC_(value) - $function of one codec (spark-mlt $version)", "")
    registry(session).registerFunction(FunctionIdentifier(name), info, builder)
  }

  /** The version of this jar, to tell it apart from another spark-mlt's. */
  def version: String = Option(getClass.getPackage.getImplementationVersion).getOrElse("unknown")
}

/**
 * The session extension: `spark.sql.extensions=io.sparkmlt.MltExtensions`, or found by
 * Spark's service loader when the jar is on the driver's class path at session start.
 */
class MltExtensions extends SparkSessionExtensionsProvider {
  override def apply(extensions: SparkSessionExtensions): Unit = MltFunctions.functions.foreach(extensions.injectFunction)
}
