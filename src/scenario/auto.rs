//! [`Auto`]: a setting the engine derives itself unless the scenario gives it.

use serde::de::IntoDeserializer;
use serde::{Deserialize, Serialize};

/// A value, or `"auto"`: what the real engine would derive (from the GPU, the parallelism, its
/// other settings) where the scenario gives none.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Auto<T> {
    /// The engine's own default, derived where it is used.
    #[default]
    Derived,
    /// This value.
    Set(T),
}

impl<T: Copy> Auto<T> {
    /// The value set, `None` when derived.
    pub fn set(self) -> Option<T> {
        match self {
            Auto::Derived => None,
            Auto::Set(v) => Some(v),
        }
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Auto<T> {
    fn schema_name() -> String {
        format!("Auto_{}", T::schema_name())
    }

    fn json_schema(g: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{Metadata, SchemaObject, SubschemaValidation};
        let auto = SchemaObject {
            const_value: Some("auto".into()),
            ..Default::default()
        };
        // The value's own words ("a whole number >= 1, or \"unbounded\""), else its type's.
        let value = match T::json_schema(g) {
            schemars::schema::Schema::Object(o) => {
                o.metadata.clone().and_then(|m| m.description).or_else(|| {
                    let whole =
                        o.instance_type == Some(schemars::schema::InstanceType::Integer.into());
                    Some(if whole { "a whole number" } else { "a number" }.into())
                })
            }
            schemars::schema::Schema::Bool(_) => None,
        }
        .unwrap_or_else(|| "a value".into());
        SchemaObject {
            metadata: Some(Box::new(Metadata {
                description: Some(format!("{value}, or \"auto\" for the engine's own")),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation {
                one_of: Some(vec![g.subschema_for::<T>(), auto.into()]),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}

impl<T: Serialize> Serialize for Auto<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Auto::Derived => s.serialize_str("auto"),
            Auto::Set(v) => v.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Auto<T> {
    /// `"auto"`, or what `T` reads (a number's own errors stay `T`'s).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Auto<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a value or \"auto\"")
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Auto<T>, E> {
                T::deserialize(n.into_deserializer()).map(Auto::Set)
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Auto<T>, E> {
                T::deserialize(n.into_deserializer()).map(Auto::Set)
            }

            fn visit_f64<E: serde::de::Error>(self, x: f64) -> Result<Auto<T>, E> {
                T::deserialize(x.into_deserializer()).map(Auto::Set)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Auto<T>, E> {
                if v == "auto" {
                    return Ok(Auto::Derived);
                }
                // A word of `T`'s own ("unbounded" for a limit), or neither.
                T::deserialize(v.into_deserializer())
                    .map(Auto::Set)
                    .map_err(|e: E| E::custom(format!("{}, or \"auto\"", e.to_string().trim_end())))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::Auto;

    #[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq)]
    struct T {
        share: Auto<f64>,
        count: Auto<usize>,
    }

    #[test]
    fn reads_auto_or_a_number_and_writes_them_back() {
        let t: T = toml::from_str("share = 0.85\ncount = \"auto\"").unwrap();
        assert_eq!(
            t,
            T {
                share: Auto::Set(0.85),
                count: Auto::Derived
            }
        );
        assert_eq!(
            toml::to_string(&t).unwrap(),
            "share = 0.85\ncount = \"auto\"\n"
        );
        let whole: T = toml::from_str("share = 1\ncount = 16").unwrap();
        assert_eq!((whole.share, whole.count), (Auto::Set(1.0), Auto::Set(16)));
    }

    #[test]
    fn a_limit_reads_its_own_word_beside_auto() {
        #[derive(serde::Deserialize, Debug)]
        struct L {
            l: Auto<crate::scenario::Limit>,
        }
        let read = |text: &str| toml::from_str::<L>(text).map(|l| l.l);
        assert_eq!(
            read("l = \"unbounded\"").unwrap(),
            Auto::Set(crate::scenario::Limit::Unbounded)
        );
        assert_eq!(read("l = \"auto\"").unwrap(), Auto::Derived);
        assert_eq!(
            read("l = 4").unwrap(),
            Auto::Set(crate::scenario::Limit::Count(4))
        );
        let e = read("l = \"many\"").unwrap_err().to_string();
        assert!(
            e.contains("\"unbounded\", got \"many\", or \"auto\""),
            "{e}"
        );
    }

    #[test]
    fn refuses_other_words_and_what_the_value_type_refuses() {
        let e = toml::from_str::<T>("share = \"half\"\ncount = 1").unwrap_err();
        assert!(
            e.to_string()
                .contains("invalid type: string \"half\", expected f64, or \"auto\""),
            "{e}"
        );
        let e = toml::from_str::<T>("share = 0.5\ncount = -3").unwrap_err();
        assert!(e.to_string().contains("-3"), "{e}");
    }
}
