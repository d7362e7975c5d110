# Sourced by the integration tests: a CA and certificates for 127.0.0.0/8, made with openssl in
# $log (which the caller sets).
#   make_ca NAME                    -> $log/NAME.pem, $log/NAME.key
#   make_cert NAME CA DAYS SERIAL [SAN]  -> $log/NAME.pem, $log/NAME.key (signed by CA; SAN
#                                           default: the loopback addresses and localhost)
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$log/$1.key" \
    -out "$log/$1.pem" -days 2 -subj "/CN=$1" 2> /dev/null
}
make_cert() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$log/$1.key" \
    -out "$log/$1.csr" -subj "/CN=$1" 2> /dev/null
  printf 'subjectAltName=%s\n' "${5:-IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,DNS:localhost}" \
    > "$log/san.ext"
  openssl x509 -req -in "$log/$1.csr" -CA "$log/$2.pem" -CAkey "$log/$2.key" -out "$log/$1.pem" \
    -days "$3" -set_serial "$4" -extfile "$log/san.ext" 2> /dev/null
}
