//! Thrift protocol writers: the few primitives that `jaeger.thrift` needs, in
//! the Compact protocol (agent, UDP) and the Binary protocol (collector, HTTP).
//!
//! Both write into a `Vec<u8>` and never fail. The model encoder
//! ([`crate::model`]) is generic over [`Protocol`], so each Jaeger structure
//! is described once.

/// The value types that appear in `jaeger.thrift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Bool,
    I32,
    I64,
    String,
    Struct,
    List,
}

/// Writes Thrift values into a byte buffer.
///
/// A struct is written as `struct_begin`, its fields (each a `field_*` header
/// followed by the value), then `struct_end`, which writes the stop byte.
pub(crate) trait Protocol {
    /// The bytes written so far.
    fn buf(&mut self) -> &mut Vec<u8>;
    fn struct_begin(&mut self);
    fn struct_end(&mut self);
    /// The header of field `id`, whose value of type `ty` follows. Not for
    /// bools: use [`Protocol::field_bool`].
    fn field(&mut self, id: i16, ty: Type);
    /// A whole bool field (the Compact protocol folds the value into the header).
    fn field_bool(&mut self, id: i16, value: bool);
    fn i32(&mut self, value: i32);
    fn i64(&mut self, value: i64);
    fn string(&mut self, value: &str);
    /// A list header; `len` elements of type `elem` follow.
    fn list_begin(&mut self, elem: Type, len: usize);

    /// An i32 field.
    fn field_i32(&mut self, id: i16, value: i32) {
        self.field(id, Type::I32);
        self.i32(value);
    }

    /// An i64 field.
    fn field_i64(&mut self, id: i16, value: i64) {
        self.field(id, Type::I64);
        self.i64(value);
    }

    /// A string field.
    fn field_string(&mut self, id: i16, value: &str) {
        self.field(id, Type::String);
        self.string(value);
    }
}

/// The Thrift Compact protocol.
#[derive(Default)]
pub(crate) struct Compact {
    pub(crate) buf: Vec<u8>,
    /// The id of the last field written in the current struct.
    last_id: i16,
    /// `last_id` of each enclosing struct.
    outer_ids: Vec<i16>,
}

impl Compact {
    const BOOL_TRUE: u8 = 1;
    const BOOL_FALSE: u8 = 2;

    fn code(ty: Type) -> u8 {
        match ty {
            Type::Bool => Compact::BOOL_TRUE,
            Type::I32 => 5,
            Type::I64 => 6,
            Type::String => 8,
            Type::List => 9,
            Type::Struct => 12,
        }
    }

    /// Unsigned LEB128.
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn zigzag64(value: i64) -> u64 {
        ((value << 1) ^ (value >> 63)) as u64
    }

    fn zigzag32(value: i32) -> u32 {
        ((value << 1) ^ (value >> 31)) as u32
    }

    fn field_header(&mut self, id: i16, code: u8) {
        let delta = i32::from(id) - i32::from(self.last_id);
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | code);
        } else {
            self.buf.push(code);
            self.varint(u64::from(Compact::zigzag32(i32::from(id))));
        }
        self.last_id = id;
    }

    /// A message header: `emitBatch`-style calls are `oneway` (type 4).
    pub(crate) fn message_begin_oneway(&mut self, name: &str, seq_id: i32) {
        const PROTOCOL_ID: u8 = 0x82;
        const VERSION: u8 = 1;
        const ONEWAY: u8 = 4;
        self.buf.push(PROTOCOL_ID);
        self.buf.push((ONEWAY << 5) | VERSION);
        // The sequence id is a plain varint of its 32 bits, not zigzag.
        self.varint(u64::from(seq_id as u32));
        self.string(name);
    }
}

impl Protocol for Compact {
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    fn struct_begin(&mut self) {
        self.outer_ids.push(self.last_id);
        self.last_id = 0;
    }

    fn struct_end(&mut self) {
        self.buf.push(0);
        self.last_id = self.outer_ids.pop().unwrap_or(0);
    }

    fn field(&mut self, id: i16, ty: Type) {
        self.field_header(id, Compact::code(ty));
    }

    fn field_bool(&mut self, id: i16, value: bool) {
        let code = if value { Compact::BOOL_TRUE } else { Compact::BOOL_FALSE };
        self.field_header(id, code);
    }

    fn i32(&mut self, value: i32) {
        self.varint(u64::from(Compact::zigzag32(value)));
    }

    fn i64(&mut self, value: i64) {
        self.varint(Compact::zigzag64(value));
    }

    fn string(&mut self, value: &str) {
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value.as_bytes());
    }

    fn list_begin(&mut self, elem: Type, len: usize) {
        let code = Compact::code(elem);
        if len < 15 {
            self.buf.push(((len as u8) << 4) | code);
        } else {
            self.buf.push(0xf0 | code);
            self.varint(len as u64);
        }
    }
}

/// The Thrift Binary protocol (big-endian, fixed-width).
#[derive(Default)]
pub(crate) struct Binary {
    pub(crate) buf: Vec<u8>,
}

impl Binary {
    fn code(ty: Type) -> u8 {
        match ty {
            Type::Bool => 2,
            Type::I32 => 8,
            Type::I64 => 10,
            Type::String => 11,
            Type::Struct => 12,
            Type::List => 15,
        }
    }
}

impl Protocol for Binary {
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    fn struct_begin(&mut self) {}

    fn struct_end(&mut self) {
        self.buf.push(0);
    }

    fn field(&mut self, id: i16, ty: Type) {
        self.buf.push(Binary::code(ty));
        self.buf.extend_from_slice(&id.to_be_bytes());
    }

    fn field_bool(&mut self, id: i16, value: bool) {
        self.field(id, Type::Bool);
        self.buf.push(u8::from(value));
    }

    fn i32(&mut self, value: i32) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    fn i64(&mut self, value: i64) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    fn string(&mut self, value: &str) {
        // Lengths beyond i32 cannot be encoded; the model keeps every string
        // far below that (see `MAX_STRING_BYTES` in `model.rs`).
        self.i32(value.len() as i32);
        self.buf.extend_from_slice(value.as_bytes());
    }

    fn list_begin(&mut self, elem: Type, len: usize) {
        self.buf.push(Binary::code(elem));
        self.i32(len as i32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_long_form_field_and_negative_i64() {
        // From the wire facts: long-form field 20 with i64 -1 -> 06 28 01.
        let mut w = Compact::default();
        w.struct_begin();
        w.field_i64(20, -1);
        assert_eq!(w.buf, [0x06, 0x28, 0x01]);
    }

    #[test]
    fn compact_list_of_twenty_structs_and_false_bool() {
        let mut w = Compact::default();
        w.list_begin(Type::Struct, 20);
        assert_eq!(w.buf, [0xfc, 0x14]);
        let mut w = Compact::default();
        w.struct_begin();
        w.field_bool(1, false);
        assert_eq!(w.buf, [0x12]);
    }

    #[test]
    fn compact_field_ids_restart_in_nested_structs() {
        let mut w = Compact::default();
        w.struct_begin();
        w.field(5, Type::Struct);
        w.struct_begin();
        w.field_i32(1, 1);
        w.struct_end();
        w.field_i32(6, 2);
        w.struct_end();
        assert_eq!(w.buf, [0x5c, 0x15, 0x02, 0x00, 0x15, 0x04, 0x00]);
    }

    #[test]
    fn binary_is_big_endian_with_i16_ids() {
        let mut w = Binary::default();
        w.field_i64(3, 1);
        w.field_string(1, "é");
        w.field_bool(2, true);
        w.list_begin(Type::Struct, 2);
        assert_eq!(
            w.buf,
            [
                10, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, // i64
                11, 0, 1, 0, 0, 0, 2, 0xc3, 0xa9, // string
                2, 0, 2, 1, // bool
                12, 0, 0, 0, 2, // list header
            ]
        );
    }
}
