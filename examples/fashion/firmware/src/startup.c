/* Cortex-M4 start-up for QEMU's mps2-an386, semihosting I/O (newlib's librdimon: --specs=rdimon.specs).
 * Reset: enable the FPU, copy .data, zero .bss, set up semihosting stdout, run constructors, then
 * exit(main()): QEMU ends with main's status. A fault prints its name and the fault status registers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern uint32_t __StackTop, __data_load__, __data_start__, __data_end__, __bss_start__, __bss_end__;
extern int main(void);
extern void __libc_init_array(void);
extern void initialise_monitor_handles(void);

/* -nostartfiles drops crti.o, which __libc_init_array expects to provide these. */
void _init(void) {}
void _fini(void) {}

void Reset_Handler(void) __attribute__((naked, noreturn));

static void __attribute__((noreturn)) fault(const char *name)
{
    printf("\nFAULT %s cfsr=0x%08lx hfsr=0x%08lx\n", name, (unsigned long)*(volatile uint32_t *)0xE000ED28u,
           (unsigned long)*(volatile uint32_t *)0xE000ED2Cu);
    exit(127);
}

static void HardFault_Handler(void) { fault("HardFault"); }
static void MemManage_Handler(void) { fault("MemManage"); }
static void BusFault_Handler(void) { fault("BusFault"); }
static void UsageFault_Handler(void) { fault("UsageFault"); }
static void Other_Handler(void) { fault("unexpected exception"); }

/* The core reads the initial stack pointer and the reset address from the image's first two words. */
__attribute__((section(".isr_vector"), used)) const void *const vector_table[16] = {
    &__StackTop,        Reset_Handler,     Other_Handler, HardFault_Handler,
    MemManage_Handler,  BusFault_Handler,  UsageFault_Handler, 0,
    0,                  0,                 0,             Other_Handler, /* SVCall */
    Other_Handler,      0,                 Other_Handler, Other_Handler, /* DebugMon, PendSV, SysTick */
};

static void __attribute__((used, noreturn)) reset_c(void)
{
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20); /* CPACR: CP10/CP11 (the FPU) full access */
    __asm volatile("dsb\n\tisb" ::: "memory");
    *(volatile uint32_t *)0xE000ED24u |= (7u << 16); /* SHCSR: name MemManage/BusFault/UsageFault */
    for (uint32_t *src = &__data_load__, *dst = &__data_start__; dst < &__data_end__;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &__bss_start__; dst < &__bss_end__;) {
        *dst++ = 0;
    }
    initialise_monitor_handles();
    __libc_init_array();
    exit(main());
}

void Reset_Handler(void)
{
    __asm volatile("b reset_c"); /* naked: no prologue (which may touch the FPU) before CPACR is set */
}
