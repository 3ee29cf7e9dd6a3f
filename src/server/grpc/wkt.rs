//! `google.protobuf.Struct`, `Value` and `ListValue` with their JSON mapping, written here
//! rather than taken from `pbjson-types` for one reason: those keep a Struct's fields in a
//! `HashMap`, whose order differs between two encodings of the same object, so two streams of
//! the same task would not carry the same bytes (the conformance kit compares them). Here the
//! fields are a `BTreeMap`: sorted, and the same bytes every time.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value as Json;

/// `google.protobuf.Struct`: a JSON object.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Struct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: BTreeMap<String, Value>,
}

/// `google.protobuf.Value`: any JSON value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

/// `google.protobuf.ListValue`: a JSON array.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// `google.protobuf.NullValue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NullValue {
    NullValue = 0,
}

pub mod value {
    /// The kinds of a [`Value`](super::Value).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        #[prost(double, tag = "2")]
        NumberValue(f64),
        #[prost(string, tag = "3")]
        StringValue(String),
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

impl From<&Json> for Value {
    fn from(j: &Json) -> Value {
        use value::Kind;
        let kind = match j {
            Json::Null => Kind::NullValue(NullValue::NullValue as i32),
            Json::Bool(b) => Kind::BoolValue(*b),
            Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
            Json::String(s) => Kind::StringValue(s.clone()),
            Json::Array(a) => Kind::ListValue(ListValue {
                values: a.iter().map(Value::from).collect(),
            }),
            Json::Object(o) => Kind::StructValue(Struct::from(o)),
        };
        Value { kind: Some(kind) }
    }
}

impl From<&serde_json::Map<String, Json>> for Struct {
    fn from(o: &serde_json::Map<String, Json>) -> Struct {
        Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), Value::from(v))).collect(),
        }
    }
}

impl From<&Value> for Json {
    fn from(v: &Value) -> Json {
        use value::Kind;
        match &v.kind {
            None | Some(Kind::NullValue(_)) => Json::Null,
            Some(Kind::BoolValue(b)) => Json::Bool(*b),
            Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
                .map(Json::Number)
                .unwrap_or(Json::Null),
            Some(Kind::StringValue(s)) => Json::String(s.clone()),
            Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(Json::from).collect()),
            Some(Kind::StructValue(s)) => Json::Object(object(s)),
        }
    }
}

fn object(s: &Struct) -> serde_json::Map<String, Json> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), Json::from(v)))
        .collect()
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value {
            kind: Some(value::Kind::StringValue(s)),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Json::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        Ok(Value::from(&Json::deserialize(d)?))
    }
}

impl Serialize for Struct {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        object(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Struct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Struct, D::Error> {
        let o = serde_json::Map::<String, Json>::deserialize(d)?;
        Ok(Struct::from(&o))
    }
}

impl Serialize for ListValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Json::Array(self.values.iter().map(Json::from).collect()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ListValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ListValue, D::Error> {
        let a = Vec::<Json>::deserialize(d)?;
        Ok(ListValue {
            values: a.iter().map(Value::from).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    #[test]
    fn json_round_trips_and_encodes_the_same_bytes_every_time() {
        let j = json!({"z": 1.5, "a": [true, null, "s", {"k": {"n": -2.0}}], "m": "x"});
        let v: Value = serde_json::from_value(j.clone()).unwrap();
        assert_eq!(serde_json::to_value(&v).unwrap(), j);
        let bytes = v.encode_to_vec();
        for _ in 0..20 {
            let again: Value = serde_json::from_value(j.clone()).unwrap();
            assert_eq!(again.encode_to_vec(), bytes);
        }
        assert_eq!(Value::decode(bytes.as_slice()).unwrap(), v);
    }
}
